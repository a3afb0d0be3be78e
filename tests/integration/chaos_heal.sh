#!/bin/sh
# chaos_heal.sh BUILD: `iod chaos` faults that heal (docs/chaos.md): pause
# stops and resumes; loss is a named numgen table, listed with its time
# left and healed by heal --all; a fault whose keeper died is healed by the
# next command's keeper once overdue. Needs root and nft. One RESULT line a
# check (lib.sh). A plan with a link step on this loopback cluster (no
# underlay) is exit 2 with its file:line:col.
set -u
. "$(dirname "$0")/lib.sh"
need_chaos "${1:-build}"
chaos_up
t0=$(chaos_tables)

# ---- pause: stopped for the duration, running after ----------------------
P=$(cat "$IOD_STATE_DIR/server-2.pid")
"$IOD" chaos pause server-2 --duration 1s --detach >/dev/null 2>&1
st1=$(awk '{print $3}' "/proc/$P/stat")
sleep 1.5
st2=$(awk '{print $3}' "/proc/$P/stat")
[ "$st1" = T ] && [ "$st2" != T ] && ok "pause_stops_then_resumes" ||
	bad "pause_stops_then_resumes ($st1 then $st2)"

# ---- loss and list: a named numgen table, listed, healed by --all --------
"$IOD" chaos loss server-1 --percent 50 --duration 30s --detach -o json >"$T/l.json" 2>&1
lid=$(jq -r .id "$T/l.json")
nft list table inet "iod_chaos_$lid" 2>/dev/null | grep -q "numgen random mod 100 < 50 drop"
has=$?
"$IOD" chaos list -o json >"$T/list.json"
listed=$(jq -r --arg id "$lid" '.faults[] | select(.id == $id) | .left_ms' "$T/list.json")
"$IOD" chaos heal --all >/dev/null 2>&1
if [ "$has" = 0 ] && [ -n "$listed" ] && [ "$listed" -gt 20000 ] && [ "$(chaos_records)" = 0 ] &&
	[ "$(chaos_tables)" = "$t0" ]; then
	ok "loss_listed_and_healed_by_all"
else
	bad "loss_listed_and_healed_by_all (table $has, left '$listed')"
fi

# ---- a keeper that died: the next command heals what is overdue ----------
"$IOD" chaos partition --between server-2 --duration 1s --detach -o json >"$T/o.json" 2>&1
oid=$(jq -r .id "$T/o.json")
kill -9 "$(cat "$IOD_STATE_DIR/chaos/keeper.pid")"
sleep 1.3 # overdue: past its 1 s (a short one could be healed before the kill, under load)
was=$(nft list table inet "iod_chaos_$oid" >/dev/null 2>&1 && echo 1 || echo 0)
"$IOD" chaos list >/dev/null 2>&1
wait_for 3 sh -c "! nft list table inet iod_chaos_$oid >/dev/null 2>&1"
healed=$?
# the record goes last (see above): waited for, briefly
wait_for 1 sh -c "[ ! -f '$IOD_STATE_DIR/chaos/$oid.json' ]"
why=""
[ "$was" = 1 ] || why="$why; the table was gone before a new keeper ran (keeper.log: $(tail -4 "$IOD_STATE_DIR/chaos/keeper.log" | tr "\n" " "))"
[ "$healed" = 0 ] || why="$why; the new keeper left the table for 3 s"
[ "$(chaos_records)" = 0 ] || why="$why; records left: $(cd "$IOD_STATE_DIR/chaos" && ls ./*.json | tr '\n' ' ')"
[ -z "$why" ] && ok "overdue_fault_healed_by_a_new_keeper" ||
	bad "overdue_fault_healed_by_a_new_keeper (${why#; })"

# ---- a plan's link step on a cluster without an underlay: exit 2 ---------
printf 'duration: 8s\nfaults:\n  - {action: partition, selector: link/leaf1-spine1, duration: 2s}\n' >"$T/link.yaml"
"$IOD" chaos run --plan "$T/link.yaml" >"$T/link.out" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q "link.yaml:3:.*selector link/leaf1-spine1: .*has no underlay" "$T/link.out" &&
	[ "$(chaos_records)" = 0 ] && [ "$(chaos_tables)" = "$t0" ]; then
	ok "plan_link_step_without_an_underlay_exits_2"
else
	bad "plan_link_step_without_an_underlay_exits_2 (rc $rc: $(cat "$T/link.out"))"
fi
