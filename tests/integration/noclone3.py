#!/usr/bin/env python3
"""noclone3.py ERRNO CMD [ARGS...]: runs CMD under a seccomp filter under which clone3(2) fails with ERRNO
(38 ENOSYS: a kernel before 5.3, Docker's default profile since 20.10.10; 1 EPERM: Docker before it), so that
mongolock starts the job the old way (fork, then the move into the job's cgroup). x86-64 only; exit 2 when
the filter cannot be installed."""
import ctypes
import os
import struct
import sys

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
SECCOMP_RET_ERRNO, SECCOMP_RET_ALLOW = 0x00050000, 0x7FFF0000
BPF_LD_W_ABS, BPF_JEQ_K, BPF_RET_K = 0x20, 0x15, 0x06
AUDIT_ARCH_X86_64, SYS_CLONE3 = 0xC000003E, 435


def insn(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: noclone3.py ERRNO CMD [ARGS...]")
    err = int(sys.argv[1]) & 0xFFFF
    program = b"".join([
        insn(BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        insn(BPF_JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        insn(BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
        insn(BPF_JEQ_K, 0, 1, SYS_CLONE3),
        insn(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | err),
        insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ])
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = struct.pack("HxxxxxxQ", len(program) // 8, ctypes.addressof(buf))
    fbuf = ctypes.create_string_buffer(fprog, len(fprog))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0 or \
            libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fbuf), 0, 0) != 0:
        print(f"noclone3.py: seccomp: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        sys.exit(2)
    os.execvp(sys.argv[2], sys.argv[2:])


main()
