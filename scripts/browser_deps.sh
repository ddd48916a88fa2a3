#!/usr/bin/env bash
# Debian's headless Chromium and its ChromeDriver, for the browser tests (make setup): installed
# once, when either is missing. Needs root or sudo, as any Debian package does.
set -euo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "browser_deps: chromium and chromium-driver are missing; install them as root" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 || {
  $sudo apt-get update -q >/dev/null
  $sudo apt-get install -y -q chromium chromium-driver >/dev/null
}
echo "browser_deps: $(chromium --version) and $(chromedriver --version | cut -d' ' -f1-2) installed"
