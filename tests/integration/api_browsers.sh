#!/bin/bash
# Pages of other sites cannot use the REST API through the operator's
# browser. Without a token, a page the operator visits could start workflows
# through the API on localhost (cross-site request forgery: a form or a
# fetch with a plain-text body needs no preflight), or read and drive it
# through a name of its own made to resolve to 127.0.0.1 (DNS rebinding).
# weftd refuses (403, saying why) a Host that is a name other than localhost
# unless api_hosts lists it (with api_hosts unset, any name only when a token
# guards the API and it listens on an address other hosts reach), and, on
# /api/, a browser's request that is not from its own pages (Sec-Fetch-Site,
# Origin). Clients that are not browsers (curl, the SDKs, weft --api) send
# neither of those two headers.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
command -v curl >/dev/null 2>&1 || { echo "curl not installed: skipping"; exit 77; }
start_redis
start_weftd d1 --workers 1 --api 127.0.0.1:0
API="http://$(api_of d1)" || { not_ok "weftd did not start"; finish; exit 1; }
hp=${API#http://}
port=${hp##*:}
wf='{"name":"csrf","workflowDef":{"name":"csrf","tasks":[{"name":"t","taskReferenceName":"t","type":"SIMPLE"}]}}'
# post NAME CODE [CURL ARGS...]: POST /api/workflow answers CODE
post() {
    n=$1 want=$2
    shift 2
    code=$(curl -s -o "$TMP/body" -w '%{http_code}' -X POST "$API/api/workflow" \
        -H 'Content-Type: text/plain' -d "$wf" "$@")
    body=$(cat "$TMP/body")
    if [ "$code" = "$want" ]; then ok "$n: $want"; else not_ok "$n: HTTP $code, wanted $want: ${body:0:300}"; fi
}
started() { rcli --scan --pattern "${WEFT_KEY_PREFIX}{*}" | grep -c -v ':' ; }

post "curl, no browser headers" 200
post "the UI's own page (same origin)" 200 -H "Origin: $API" -H 'Sec-Fetch-Site: same-origin'
post "typed or bookmarked (Sec-Fetch-Site: none)" 200 -H 'Sec-Fetch-Site: none'
post "localhost by name" 200 -H "Host: localhost:$port" -H "Origin: http://localhost:$port"
post "an IPv6 address" 200 -H "Host: [::1]:$port"
post "its own page over https (a proxy)" 200 -H "Origin: https://$hp"
n0=$(started)
post "a page of another site" 403 -H 'Origin: https://evil.example' -H 'Sec-Fetch-Site: cross-site'
case $body in *"Sec-Fetch-Site: cross-site"*) ok "it says why: ${body:0:160}" ;; *) not_ok "why: $body" ;; esac
post "another site, Origin alone (an older browser)" 403 -H 'Origin: https://evil.example'
case $body in *"Origin: https://evil.example"*) ok "it names the origin" ;; *) not_ok "why: $body" ;; esac
post "another port of localhost (same-site, another origin)" 403 -H 'Origin: http://127.0.0.1:1' -H 'Sec-Fetch-Site: same-site'
post "an opaque origin (a sandboxed frame)" 403 -H 'Origin: null'
post "an origin of another scheme" 403 -H "Origin: evil://$hp"
post "DNS rebinding: a name of the attacker's resolving here" 403 -H "Host: evil.example:$port" -H "Origin: http://evil.example:$port" -H 'Sec-Fetch-Site: same-origin'
case $body in *"Host 'evil.example:$port' is not a name of this server"*) ok "it names the Host" ;; *) not_ok "why: $body" ;; esac
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Host: evil.example:$port" "$API/metrics")
[ "$code" = 403 ] && ok "rebinding reads no /metrics either: 403" || not_ok "/metrics by a foreign Host: $code"
[ "$(started)" = "$n0" ] && ok "none of the refused requests started a workflow" || not_ok "$(started) workflows, were $n0"
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Origin: https://evil.example' "$API/health")
[ "$code" = 200 ] && ok "outside /api/ an Origin alone is not refused (/health: 200)" || not_ok "/health: $code"
run_weft --api "$API" list --limit 1
expect_rc "weft --api is served" 0
stop_weftd_clean d1

# api_hosts: the names a proxy passes on; "*" any
start_weftd d2 --workers 1 --api 127.0.0.1:0 --set 'api_hosts=weft.example,other.example'
API="http://$(api_of d2)" || { not_ok "weftd did not start"; finish; exit 1; }
hp=${API#http://}
port=${hp##*:}
post "a listed name" 200 -H "Host: weft.example" -H 'Origin: https://weft.example' -H 'Sec-Fetch-Site: same-origin'
post "a listed origin behind a proxy that rewrote Host" 200 -H 'Origin: https://other.example'
post "a listed name on another port (another origin)" 403 -H 'Origin: http://other.example:31337'
post "a name not listed" 403 -H "Host: evil.example:$port"
stop_weftd_clean d2
start_weftd d3 --workers 1 --api 127.0.0.1:0 --set 'api_hosts=*'
API="http://$(api_of d3)" || { not_ok "weftd did not start"; finish; exit 1; }
post "api_hosts=*: any name" 200 -H "Host: anything.example"
post "api_hosts=*: still no other site's page" 403 -H 'Origin: https://anything.example'
stop_weftd_clean d3
# listening where other hosts reach it, with no api_hosts: names only with a
# token (a token guards /api/ from a page that rebinds a name: it has none)
start_weftd d4 --workers 1 --api 0.0.0.0:0
wait_for 20 grep -q 'msg="started:' "$TMP/d4.log" || { not_ok "weftd did not start"; finish; exit 1; }
API="http://127.0.0.1:$(grep -o 'api=[0-9.]*:[0-9]*' "$TMP/d4.log" | head -n 1 | cut -d: -f2)"
post "0.0.0.0, no token: an address" 200
post "0.0.0.0, no token: a name" 403 -H "Host: weft.lan:80"
stop_weftd_clean d4
WEFT_API_TOKEN=s3cret start_weftd d5 --workers 1 --api 0.0.0.0:0
wait_for 20 grep -q 'msg="started:' "$TMP/d5.log" || { not_ok "weftd did not start"; finish; exit 1; }
API="http://127.0.0.1:$(grep -o 'api=[0-9.]*:[0-9]*' "$TMP/d5.log" | head -n 1 | cut -d: -f2)"
post "0.0.0.0 with a token: any name" 200 -H "Host: weft.lan:80" -H 'Authorization: Bearer s3cret'
post "0.0.0.0 with a token: still no other site's page" 403 -H "Host: weft.lan:80" -H 'Authorization: Bearer s3cret' -H 'Origin: https://evil.example'
stop_weftd_clean d5
# WEFT_API_HOSTS, as in a container's environment
WEFT_API_HOSTS=env.example start_weftd d6 --workers 1 --api 127.0.0.1:0
API="http://$(api_of d6)" || { not_ok "weftd did not start"; finish; exit 1; }
post "WEFT_API_HOSTS lists a name" 200 -H "Host: env.example"
stop_weftd_clean d6
finish
