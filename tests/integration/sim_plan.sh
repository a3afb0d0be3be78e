#!/bin/sh
# sim_plan.sh BUILD: `iod sim --plan FILE` runs a chaos plan's faults in the
# whole-cluster simulator (issue 20, docs/chaos.md): the kill plan of
# examples/chaos/ gives its server and node faults at the plan's times, the
# same seed the same event log (its hash); a plan with what the simulator cannot
# model (examples/chaos/plan.yaml: a partition) and a bad plan file exit 2
# naming the step or the place; examples/chaos/plan-link.yaml's link steps
# are the simulator's link faults (a lossy link or a leaf beyond --nodes:
# exit 2).
# iod-test: parallel
set -u
. "$(dirname "$0")/lib.sh"
need_iod "${1:-build}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
EX="$(dirname "$0")/../../examples/chaos"

# 2 s leader 3 s; 9 s one server paused 2 s; 15 s a node 5 s; 24 s leader;
# 31 s a server; 37 s: 37+5+1 > 40, no more
"$IOD" sim --nodes 4 --gpus 16 --steps 400 --plan "$EX/plan-kill.yaml" --quiet --log "$tmp/a.log" \
	>"$tmp/a.txt" 2>&1; rc=$?
"$IOD" sim --nodes 4 --gpus 16 --steps 400 --plan "$EX/plan-kill.yaml" --quiet >"$tmp/b.txt" 2>&1
srv=$(sed -n 's/.*, \([0-9]*\) server fault(s).*/\1/p' "$tmp/a.txt")
times=$(grep " fault \(leader\|server\|node\) " "$tmp/a.log" | awk '{printf "%s%d", (n++ ? "," : ""), $1 / 1e9}')
if [ "$rc" = 0 ] && [ "$srv" = 4 ] && [ "$times" = "2,9,15,24,31" ] &&
	grep -q "node at 15.0 s" "$tmp/a.txt" &&
	[ "$(grep "event log sha256" "$tmp/a.txt")" = "$(grep "event log sha256" "$tmp/b.txt")" ]; then
	ok "sim_plan_kill_plan (faults at $times s, $srv server faults, the same event log twice)"
else
	bad "sim_plan_kill_plan (exit $rc, faults at '$times', server faults '$srv': $(tail -5 "$tmp/a.txt"))"
fi

"$IOD" sim --nodes 4 --gpus 16 --plan "$EX/plan.yaml" --quiet >"$tmp/p.txt" 2>&1; rc=$?
if [ "$rc" = 2 ] && grep -q "plan fault 1 (partition.*cannot model a partition" "$tmp/p.txt"; then
	ok "sim_plan_unmodelled_action_exits_2"
else
	bad "sim_plan_unmodelled_action_exits_2 (exit $rc: $(cat "$tmp/p.txt"))"
fi

printf 'duration: 10s\nfaults:\n  - {action: kill, selector: leader, duration: 1s, colour: red}\n' >"$tmp/bad.yaml"
"$IOD" sim --nodes 2 --gpus 8 --plan "$tmp/bad.yaml" --quiet >"$tmp/e.txt" 2>&1; rc=$?
"$IOD" sim --nodes 2 --gpus 8 --plan "$tmp/none.yaml" --quiet >/dev/null 2>&1; rc2=$?
if [ "$rc" = 2 ] && [ "$rc2" = 2 ] && grep -q "bad.yaml:3:.*unknown fault field" "$tmp/e.txt"; then
	ok "sim_plan_bad_file_exits_2"
else
	bad "sim_plan_bad_file_exits_2 (exit $rc, $rc2: $(cat "$tmp/e.txt"))"
fi

# underlay links: the plan of examples/chaos/plan-link.yaml (the one
# chaos_link_netns.sh runs on `iod up --netns`) as the simulator's link
# faults, leaf L on node L-1: 2 s leaf 1; 9 s leaves 1 and 2; 16 s leaf 1;
# 23 s both (the job runs from about 20 s: stalled, rerouted after 51 ms)
"$IOD" sim --nodes 2 --gpus 8 --steps 400 --plan "$EX/plan-link.yaml" --quiet --log "$tmp/l.log" \
	>"$tmp/l.txt" 2>&1; rc=$?
links=$(grep " fault link " "$tmp/l.log" | awk '{printf "%s%d@%s", (n++ ? "," : ""), $1 / 1e9, $4}')
if [ "$rc" = 0 ] &&
	[ "$links" = "2@node=n0,9@node=n0,9@node=n1,16@node=n0,23@node=n0,23@node=n1" ] &&
	grep -q "job rerouted" "$tmp/l.log" && grep -q "(1 hit the job)" "$tmp/l.txt"; then
	ok "sim_plan_link_steps_are_link_faults ($links)"
else
	bad "sim_plan_link_steps_are_link_faults (exit $rc, '$links': $(tail -3 "$tmp/l.txt"))"
fi
printf 'duration: 10s\nfaults:\n  - {action: loss, selector: link/leaf1-spine1, percent: 20, duration: 1s}\n' >"$tmp/loss.yaml"
"$IOD" sim --nodes 2 --gpus 8 --plan "$tmp/loss.yaml" --quiet >"$tmp/ll.txt" 2>&1; rc=$?
printf 'duration: 10s\nfaults:\n  - {action: partition, selector: link/leaf3-spine1, duration: 1s}\n' >"$tmp/l3.yaml"
"$IOD" sim --nodes 2 --gpus 8 --plan "$tmp/l3.yaml" --quiet >"$tmp/l3.txt" 2>&1; rc3=$?
if [ "$rc" = 2 ] && grep -q "plan fault 1 (loss.*a lossy link" "$tmp/ll.txt" &&
	[ "$rc3" = 2 ] && grep -q "link/leaf3-spine1: leaf L stands for node-L.*2 nodes" "$tmp/l3.txt"; then
	ok "sim_plan_lossy_or_missing_link_exits_2"
else
	bad "sim_plan_lossy_or_missing_link_exits_2 (exit $rc, $rc3: $(cat "$tmp/ll.txt" "$tmp/l3.txt"))"
fi
