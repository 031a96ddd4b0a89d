# Shared by chaos.sh and cluster_chaos.sh: the five kinds of workflow of
# tests/integration/chaos, started in batches, and the check that every one
# ended COMPLETED with its output and no task reference completed twice.
# Source after lib.sh; set C (the workflows' folder), PER and, for more tries
# of a start while the store is away, CHAOS_TRIES (10).
ids="$TMP/ids"; : >"$ids"
start_batch() { # from..to
    for i in $(seq "$1" "$2"); do
        for kind in chain fork dynamic sub loop; do
            # a producer retries while the store is away (the same key: never two workflows)
            for try in $(seq 1 "${CHAOS_TRIES:-10}"); do
                run_weft start "$C/$kind.lua" --input "{\"n\":$i}" --idempotency-key "$$-$kind-$i"
                [ "$rc" = 0 ] && break
                sleep 0.5
            done
            [ "$rc" = 0 ] && echo "$kind $i $last" >>"$ids" || not_ok "start $kind $i: $errout"
        done
    done
}

expected() { # kind n -> JSON
    n=$2
    case $1 in
    chain) echo "{\"v\":$(( (n + 1) * 2 - 1 ))}" ;;
    fork) echo "{\"a\":$(( n * 10 )),\"b\":$(( n * 100 ))}" ;;
    dynamic) echo "{\"sum\":$(( 210 + 20 * n ))}" ;;
    sub) echo "{\"named\":$(( n * 2 )),\"inline\":$(( n * n ))}" ;;
    loop) echo "{\"iterations\":4,\"total\":$(( 4 * n ))}" ;;
    esac
}

# check_outcomes: every started workflow's end, output and tasks
check_outcomes() {
    bad=0 dups=0 total=0
    while read -r kind n id; do
        total=$((total + 1))
        "$WEFT" wait "$id" --timeout 120 >"$TMP/w.out" 2>"$TMP/w.err"
        wrc=$?
        got=$(tail -n 1 "$TMP/w.out")
        if [ "$wrc" != 0 ] || ! "$JSONEQ" "$got" "$(expected "$kind" "$n")"; then
            bad=$((bad + 1))
            [ $bad -le 5 ] && echo "# $kind $n $id: exit $wrc, output $got, wanted $(expected "$kind" "$n"): $(cat "$TMP/w.err")"
            # where it stands: its tasks, and a sub-workflow's children
            [ $bad -le 2 ] && "$WEFT" status "$id" --no-color 2>&1 | head -n 20 | sed 's/^/#   /'
            if [ $bad -le 2 ] && [ -n "${CHAOS_KEEP:-}" ]; then
                "$WEFT" status "$id" -o json >"$CHAOS_KEEP/$id.json" 2>&1
                cp "$TMP"/*.log "$CHAOS_KEEP/" 2>/dev/null
            fi
        fi
        if ! "$WEFT" status "$id" -o json | "$BUILD/tests/wfcheck" >"$TMP/dup" 2>&1; then
            dups=$((dups + 1))
            [ $dups -le 5 ] && echo "# $kind $n $id: $(cat "$TMP/dup")"
        fi
    done <"$ids"
    [ "$total" -eq $((PER * 5)) ] && ok "$total workflows started" || not_ok "only $total of $((PER * 5)) started"
    [ $bad -eq 0 ] && ok "all $total completed with the right output" || not_ok "$bad of $total wrong or unfinished"
    [ $dups -eq 0 ] && ok "no task reference completed twice" || not_ok "$dups workflows completed a task twice"
}
