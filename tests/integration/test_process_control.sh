#!/usr/bin/env bash
# Process control on proof, not inference (issue 26): the same-host instant takeover and the final kill
# act only on complete evidence. These cases run without a cgroup for the job (MONGOLOCK_CGROUP=off: the
# fallback of process group, subreaper and /proc when it is this namespace's) or need none;
# test_cgroup.sh runs the same cases with the job in a cgroup of its own, and is reported skipped where
# mongolock cannot make one. A case that needs a second user or namespaces skips with the reason.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ITEST_DIR/process_control.sh"

run_case "zombie leader with a live thread, no cgroup: no instant takeover (item 1)" zombie_leader_blocks_takeover off
run_case "a setsid worker outlives mongolock and the group, no cgroup: no instant takeover (item 2)" setsid_worker_blocks_takeover off
run_case "hidepid=2 and another user: the contender waits for the lease (item 3)" hidepid_contender_waits
run_case "another namespace's /proc, no cgroup: killed through its process group (item 4)" foreign_proc_kill off
run_case "stop and continue of the command by pid, no terminal: no stuck guardian, no kill (item 6)" stopped_and_continued_job
run_case "nested runs: the inner job stopped and continued, the inner mongolock killed: job killed (item 5)" \
  nested_run_inner_stop_then_kill
run_case "the job's own kill -RTMIN 0 is not a kill request (item 11)" job_sends_rtmin_to_its_group
run_case "helper & exec mongolock run: the helper is left alone, no false warning (item 13)" wrapper_helper_left_alone
run_case "as PID 1: orphans reparented to mongolock are reaped while the job runs (item 13)" pid1_reaps_orphans
run_case "the holder file of a run killed while waiting is swept (item 12)" holder_file_of_a_killed_waiter_swept
finish
