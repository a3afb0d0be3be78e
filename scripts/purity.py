#!/usr/bin/env python3
"""purity.py [ROOT]: `make lint`'s purity check (ROOT/scripts/pure.txt lists
the pure files; ROOT defaults to the checkout).

A pure core gets time, randomness and I/O from its caller (docs/STYLE.md,
rule 1). This check reads each listed file with its comments and string
literals removed and fails on a shell header (sockets, threads, time,
processes, files, the HTTP client, libuv, libmicrohttpd) or a call of a
clock, random, socket, file, thread, process or print function. It prints
file:line: what, and exits 1 on any finding.
"""
import glob
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

SHELL_HEADERS = {
    "sys/socket.h", "netinet/in.h", "netinet/tcp.h", "netdb.h", "poll.h", "sys/epoll.h",
    "pthread.h", "unistd.h", "time.h", "sys/time.h", "fcntl.h", "signal.h", "sys/wait.h",
    "dirent.h", "curl/curl.h", "uv.h", "microhttpd.h", "sys/eventfd.h", "stdatomic.h",
    "iod/api.h", "iod/io.h", "iod/agent_run.h", "iod/mesh_proxy.h",
}
CALLS = [
    "clock_gettime", "gettimeofday", "time", "rand", "random", "srand", "srandom",
    "getrandom", "socket", "connect", "bind", "listen", "accept", "accept4", "send",
    "recv", "sendto", "recvfrom", "open", "openat", "fopen", "fdopen", "read", "write",
    "pread", "pwrite", "close", "stat", "fstat", "unlink", "rename", "mkdir", "opendir",
    "printf", "fprintf", "vfprintf", "puts", "fputs", "perror", "putchar",
    "usleep", "nanosleep", "sleep", "getenv", "setenv", "system", "fork", "execve",
    "execvp", "waitpid", "kill", "exit", "abort_program",
    "iod_clock_monotonic", "iod_time_unix_ns", "iod_buf_read_file",
]
CALL_RE = re.compile(r"(?<![\w.>])(" + "|".join(CALLS) + r"|pthread_\w+)\s*\(")
INC_RE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def strip(text):
    """Comments and string/char literals out, newlines kept (line numbers hold)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join("\n" if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def check(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        raw = f.read()
    found = []
    for m in INC_RE.finditer(raw):
        if m.group(1) in SHELL_HEADERS:
            line = raw.count("\n", 0, m.start()) + 1
            found.append("%s:%d: includes <%s>, a shell header" % (path, line, m.group(1)))
    code = strip(raw)
    for m in CALL_RE.finditer(code):
        line = code.count("\n", 0, m.start()) + 1
        found.append("%s:%d: calls %s(), not pure" % (path, line, m.group(1)))
    return found


def main():
    os.chdir(sys.argv[1] if len(sys.argv) > 1 else ROOT)
    listed = os.path.join("scripts", "pure.txt")
    files = []
    with open(listed) as f:
        for g in f:
            g = g.strip()
            if g and not g.startswith("#"):
                hit = sorted(glob.glob(g))
                if not hit:
                    print("%s: %s matches no file" % (listed, g))
                    return 1
                files += hit
    found = [x for p in files for x in check(p)]
    for x in found:
        print(x)
    if found:
        print("lint: purity: %d finding(s) in files %s lists as pure" % (len(found), listed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
