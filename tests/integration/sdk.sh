#!/bin/bash
# The official Conductor JavaScript SDK (npm @io-orkes/conductor-javascript),
# unmodified, against weftd: tests/sdk/conductor_sdk.mjs starts workflows with
# inline definitions (an HTTP task's JSON reply from tests/httpd feeding a
# LAMBDA), serves their SIMPLE tasks with the SDK's worker API, registers and
# starts definitions by name, retries a failed task, pauses, resumes and
# terminates. The SDK is installed once into $BUILD/tests/sdk/node_modules
# (npm cache under the build tree too) and reused; without node, npm or the
# npm registry the test is skipped.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
SDK_VERSION=4.0.0
SDK_DIR="$BUILD/tests/sdk"
SDK_PKG="$SDK_DIR/node_modules/@io-orkes/conductor-javascript/package.json"
HTTPD="$BUILD/tests/httpd"

command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
    { echo "node or npm not installed: npm registry unreachable, skipping"; exit 77; }
[ -x "$HTTPD" ] || { echo "# $HTTPD is not built"; exit 77; }

# ---- the SDK, installed once ----
if ! grep -q "\"version\": *\"v\{0,1\}$SDK_VERSION\"" "$SDK_PKG" 2>/dev/null; then
    mkdir -p "$SDK_DIR"
    echo "# installing @io-orkes/conductor-javascript@$SDK_VERSION into $SDK_DIR"
    # --legacy-peer-deps: the SDK's optional peers (langchain, ai) conflict otherwise;
    # --no-save: no package.json or lock file next to node_modules
    if ! timeout 300 npm install --prefix "$SDK_DIR" --cache "$SDK_DIR/.npm-cache" \
        --no-audit --no-fund --no-save --legacy-peer-deps --prefer-offline \
        --fetch-retries 1 --fetch-timeout 30000 --loglevel error --no-update-notifier \
        "@io-orkes/conductor-javascript@$SDK_VERSION" >"$TMP/npm.log" 2>&1 ||
        ! grep -q "\"version\": *\"v\{0,1\}$SDK_VERSION\"" "$SDK_PKG" 2>/dev/null; then
        sed 's/^/# npm: /' "$TMP/npm.log" | tail -n 20
        echo "npm registry unreachable (or the install failed): skipping"
        exit 77
    fi
fi
ok "the SDK $SDK_VERSION is installed"

# ---- tests/httpd, redis-server, weftd ----
"$HTTPD" "$TMP/httpd.port" &
httpd_pid=$!
trap 'kill "$httpd_pid" 2>/dev/null; wait "$httpd_pid" 2>/dev/null; cleanup_procs; rm -rf "$TMP"' EXIT
wait_for 10 test -s "$TMP/httpd.port" || { echo "# tests/httpd did not start"; exit 1; }
HTTPD_URL="http://127.0.0.1:$(cat "$TMP/httpd.port")"

start_redis
# weftd runs from the build tree, so its default plugin path is the build
# tree's plugins: http, lambda and simple among them
start_weftd d1 --workers 2 --api 127.0.0.1:0
API="http://$(api_of d1)" || exit 1
plugins=$(grep -o 'plugins=[^ "]*' "$TMP/d1.log" | head -n 1)
missing=
for p in http lambda simple; do
    case "$plugins:" in */"$p":*) ;; *) missing="$missing $p" ;; esac
done
[ -z "$missing" ] && ok "weftd serves $API with the http, lambda and simple plugins" ||
    not_ok "weftd lacks plugins:$missing ($plugins)"

# ---- the SDK script, next to the installed node_modules (as an ES module
# resolves bare imports from its own directory upwards) ----
cp "$SRC/tests/sdk/conductor_sdk.mjs" "$TMP/conductor_sdk.mjs"
ln -s "$SDK_DIR/node_modules" "$TMP/node_modules"
CONDUCTOR_SERVER_URL="$API/api" HTTPD_URL="$HTTPD_URL" SDK_TEST_TIMEOUT_MS=20000 \
    timeout 60 node "$TMP/conductor_sdk.mjs" >"$TMP/sdk.out" 2>&1
rc=$?
sed 's/^\(ok\|not ok\) - /  \1 - /' "$TMP/sdk.out"
if [ "$rc" -eq 0 ] && tail -n 1 "$TMP/sdk.out" | grep -q '^[1-9][0-9]* passed, 0 failed$'; then
    ok "conductor_sdk.mjs: $(tail -n 1 "$TMP/sdk.out")"
else
    not_ok "conductor_sdk.mjs exited $rc"
    echo "# weftd log (warnings and errors):"
    grep 'level=\(warn\|error\)' "$TMP/d1.log" | tail -n 20 | sed 's/^/# /'
fi

stop_weftd_clean d1
finish
