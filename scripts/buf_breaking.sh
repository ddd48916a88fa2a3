#!/usr/bin/env bash
# `buf breaking` of the working tree's protos against a git ref (default: main), for `make lint`.
#
# Works on a fresh CI clone where main is the only branch and may equal HEAD. Falls back to
# origin/<ref> when there is no local branch of that name. Skips with a message, and succeeds,
# only when the ref does not exist or does not contain the protos yet (before they landed).
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

"${buf}" breaking --against "${against}"
echo "buf breaking: no breaking change against ${ref}"
