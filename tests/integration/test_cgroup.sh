#!/usr/bin/env bash
# The job in a cgroup v2 group of its own (issue 26): where mongolock can make one (root with a writable
# cgroup2 hierarchy, or a delegated subtree), the job runs in it, cgroup.kill is the final kill and
# "populated 0" the proof that nothing of the job runs, for the instant takeover too. Every case skips
# (and ctest reports this suite skipped, not passed) where no group can be made, saying why.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ITEST_DIR/process_control.sh"

run_case "cgroup: the job and a setsid part of it run in the job's group; killed at --timeout; removed after" \
  job_cgroup_lifecycle
run_case "zombie leader with a live thread, cgroup: no instant takeover until it ends (item 1)" zombie_leader_blocks_takeover on
run_case "a setsid worker outlives mongolock and the group, cgroup: no instant takeover (item 2)" setsid_worker_blocks_takeover on
run_case "another namespace's /proc, cgroup: the job ignoring SIGTERM is killed at --timeout (item 4)" foreign_proc_kill on
run_case "mongolock killed, cgroup: the guardian removes the job's empty group (X12c)" killed_run_leaves_no_cgroup
run_case "clone3 refused (ENOSYS), cgroup: the job moves itself into its group; its setsid part dies with the guardian" \
  job_cgroup_without_clone3 38
run_case "clone3 refused (EPERM), cgroup: the job moves itself into its group; its setsid part dies with the guardian" \
  job_cgroup_without_clone3 1
finish
