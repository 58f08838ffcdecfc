#!/usr/bin/env python3
"""x5 helper, run as root inside a container's PID namespace: forks a process with pid PID whose start,
as /proc/PID/stat shows it to its children, is START (clock ticks), then runs CMD in it.
ns_last_pid gives the pid; a new time namespace whose boottime offset moves the reader's view of that
process's start (/proc/PID/stat field 22 is shown with the reader's time namespace offset, Linux 5.6+).
Usage: x5_forged_start.py PID START CMD...   (exit: CMD's, or 3 when the start could not be hit)"""
import ctypes, os, sys, time
CLONE_NEWTIME = 0x80
libc = ctypes.CDLL(None, use_errno=True)
pid, start, cmd = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
hz = os.sysconf("SC_CLK_TCK")
for attempt in range(20):
    r, w = os.pipe()
    helper = os.fork()
    if helper == 0:
        os.close(r)
        if libc.unshare(CLONE_NEWTIME) != 0:
            os.write(w, b"unshare failed\n"); os._exit(2)
        # The child's real start in ticks is about now; shift boottime so that it reads as START.
        now_ns = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        real_ticks = now_ns * hz // 1_000_000_000
        off_ns = (start - real_ticks) * (1_000_000_000 // hz)
        sec, nsec = divmod(off_ns, 1_000_000_000)
        with open("/proc/self/timens_offsets", "w") as f:
            f.write(f"boottime {sec} {nsec}\n")
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        child = os.fork()
        if child == 0:
            # In the new time namespace: read our own start as our children will.
            seen = int(open(f"/proc/{os.getpid()}/stat").read().rsplit(")", 1)[1].split()[19])
            if os.getpid() != pid or seen != start:
                os._exit(4)
            os.execvp(cmd[0], cmd)
        _, status = os.waitpid(child, 0)
        os._exit(os.waitstatus_to_exitcode(status))
    os.close(w)
    _, status = os.waitpid(helper, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 4:
        sys.exit(code)
sys.exit(3)
