#!/usr/bin/env bash
# `buf breaking` of the working tree's protos against a git ref (default: main), for `make lint`.
#
# Works on a fresh CI clone where main is the only branch and may equal HEAD. Falls back to
# origin/<ref> when there is no local branch of that name. Skips with a message, and succeeds,
# only when the ref does not exist or does not contain the protos yet (before they landed).
#
# An entry of buf.yaml's breaking ignore list that ends in "# until <path>" applies only while
# the ref lacks <path>: the contracts of a service may change freely until the service is on
# the ref, and are guarded from then on without anyone having to remember to edit buf.yaml.
# Usage: scripts/buf_breaking.sh [BUF] [REF]
set -euo pipefail
cd "$(dirname "$0")/.."

buf="${1:-buf}"
ref="${2:-${BUF_BREAKING_AGAINST:-main}}"

if git rev-parse --verify --quiet "refs/heads/${ref}^{commit}" >/dev/null; then
  against=".git#branch=${ref}"
elif git rev-parse --verify --quiet "refs/remotes/origin/${ref}^{commit}" >/dev/null; then
  ref="origin/${ref}"
  against=".git#ref=${ref}"
else
  echo "buf breaking: skipped, no branch '${ref}' in this clone to compare against"
  exit 0
fi

if ! git cat-file -e "${ref}:buf.yaml" 2>/dev/null || ! git cat-file -e "${ref}:protos/masa" 2>/dev/null; then
  echo "buf breaking: skipped, ${ref} has no buf.yaml and protos/masa yet"
  exit 0
fi

config="$(mktemp "${TMPDIR:-/tmp}/buf-breaking.XXXXXX.yaml")"
trap 'rm -f "${config}"' EXIT
while IFS= read -r line; do
  if [[ "${line}" =~ \#\ until\ ([^[:space:]]+)[[:space:]]*$ ]]; then
    if git cat-file -e "${ref}:${BASH_REMATCH[1]}" 2>/dev/null; then
      entry="${line%%#*}"
      echo "buf breaking: guarding ${entry#*- }again (${BASH_REMATCH[1]} is on ${ref})" >&2
      continue
    fi
  fi
  printf '%s\n' "${line}"
done <buf.yaml >"${config}"

"${buf}" breaking --config "${config}" --against "${against}"
echo "buf breaking: no breaking change against ${ref}"
