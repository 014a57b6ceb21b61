#!/usr/bin/env bash
# Installs code-server 4.96.4 (VS Code 1.96.4, runs on Node 20) and playwright-core into
# DEST, for the real-editor test. A plain `npm install code-server` fails on these machines
# (root postinstall, a git+ssh dependency, a ripgrep download), so this does its postinstall
# by hand; see ../../README.md "Testing in a real VS Code".
set -euo pipefail
DEST=${1:?usage: install-code-server.sh DEST}
VERSION=4.96.4
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
if [ -f "$DEST/.done-$VERSION" ]; then exit 0; fi

need_apt=()
command -v chromium >/dev/null || need_apt+=(chromium)
command -v rg >/dev/null || need_apt+=(ripgrep)
[ -e /usr/include/gssapi/gssapi.h ] || [ -e /usr/include/gssapi.h ] || need_apt+=(libkrb5-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get install -y "${need_apt[@]}" || { $SUDO apt-get update && $SUDO apt-get install -y "${need_apt[@]}"; }
fi

export npm_config_nodedir=/usr   # node-gyp: use the installed Node headers, download nothing
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
cd "$DEST"
[ -f package.json ] || echo '{"name":"specfill-e2e","private":true}' > package.json
npm install --ignore-scripts --no-save "code-server@$VERSION" playwright-core@1
npm rebuild argon2

VS=node_modules/code-server/lib/vscode
# One dependency is pinned to a git+ssh URL; the registry tarball of that version has the same sha512.
tarball=$(npm view @vscode/proxy-agent@0.27.0 dist.tarball)
sed -i "s#\"resolved\": \"git+ssh://[^\"]*proxy-agent[^\"]*\"#\"resolved\": \"$tarball\"#" "$VS/npm-shrinkwrap.json"
(cd "$VS" && npm install --omit=dev --ignore-scripts)
# @vscode/ripgrep's postinstall skips its download when bin/ exists.
mkdir -p "$VS/node_modules/@vscode/ripgrep/bin"
ln -sf "$(command -v rg)" "$VS/node_modules/@vscode/ripgrep/bin/rg"
(cd "$VS" && npm rebuild)
# The rest of code-server's postinstall.sh.
ln -sfn node_modules "$VS/node_modules.asar"
ln -sf code-linux.sh "$VS/bin/remote-cli/code-server"
ln -sf browser-linux.sh "$VS/bin/helpers/browser.sh"
(cd "$VS/extensions" && npm install --omit=dev --ignore-scripts)
touch "$DEST/.done-$VERSION"
