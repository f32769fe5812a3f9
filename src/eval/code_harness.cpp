// The Python harness that runs inside the sandbox for every test (see
// code_grader.h). Its side channel is fd 3, one line per message:
//   "S"            the harness started (before any program code ran);
//   "V EVENT ..."  the program attempted something the grader forbids (an
//                  audit-hook event; the OS sandbox blocks it regardless);
//   "R {json}"     functional tests: {"ok": bool, "got": repr (truncated)}.
// The audit hook classifies attempts; it is not the security boundary (the
// sandbox is), so a program that evades it still runs confined.
#include "eval/code_grader.h"

namespace skipkv::eval {

const std::string& CodeHarnessSource() {
  static const std::string kSource = R"PY(import builtins, io, json, os, resource, sys

def side(line):
    try:
        os.write(3, (line.replace("\n", " ")[:400] + "\n").encode("utf-8", "replace"))
    except OSError:
        pass

# LiveCodeBench's import prelude (lcb_runner/evaluation/testing_util.py, import_string).
FROM = ["string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random",
        "statistics", "itertools", "functools", "operator", "io", "sys", "json", "builtins", "typing"]
PRELUDE = "".join("from %s import *\n" % m for m in FROM)
PRELUDE += "".join("import %s\n" % m for m in FROM if m not in ("builtins", "typing"))
PRELUDE += "sys.setrecursionlimit(50000)\n"

FORBIDDEN = {"os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn", "os.system", "os.kill",
             "os.killpg", "subprocess.Popen", "pty.spawn", "socket.__new__", "socket.connect", "socket.bind",
             "socket.sendto", "socket.sendmsg", "socket.getaddrinfo", "socket.gethostbyname", "ctypes.dlopen",
             "ctypes.dlsym"}
PATH_EVENTS = {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.link",
               "os.symlink", "os.truncate", "os.utime", "shutil.rmtree", "shutil.copyfile", "shutil.move"}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

def outside_tmp(path):
    if isinstance(path, int):
        return False
    if isinstance(path, bytes):
        path = path.decode("utf-8", "replace")
    if not isinstance(path, str):
        path = str(path)
    p = os.path.normpath(os.path.join("/tmp", path))
    return not (p == "/tmp" or p.startswith("/tmp/"))

def violation(event, detail):
    side("V %s %s" % (event, detail))
    raise PermissionError("sandbox: %s is not allowed" % event)

def guard(event, args):
    if event in FORBIDDEN:
        violation(event, repr(args)[:200])
    elif event == "open":
        path, mode, flags = (list(args) + [None, None, None])[:3]
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                  (isinstance(flags, int) and flags & WRITE_FLAGS)
        if writing and outside_tmp(path):
            violation("open-for-writing", repr(path)[:200])
    elif event in PATH_EVENTS and args and outside_tmp(args[0]):
        violation(event, repr(args[0])[:200])

def main():
    mode, nproc = sys.argv[1], int(sys.argv[2])
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    if hard == resource.RLIM_INFINITY or hard > nproc:
        hard = nproc
    resource.setrlimit(resource.RLIMIT_NPROC, (hard, hard))
    side("S")
    with open("/sandbox/program.py", encoding="utf-8", errors="replace") as f:
        src = f.read()
    if mode == "functional":
        case = json.loads(sys.stdin.read())
        args = [json.loads(line) for line in case["input"].split("\n")]
        expected = json.loads(case["output"])
        sys.stdin = io.StringIO("")
    g = {"__name__": "__main__" if mode == "stdin" else "solution", "__builtins__": builtins}
    exec(compile(PRELUDE, "<prelude>", "exec"), g)
    code = compile(src, "program.py", "exec")
    sys.addaudithook(guard)
    if mode == "stdin":
        try:
            exec(code, g)
        except SystemExit:
            pass  # LiveCodeBench ignores exit() in stdin programs
        try:
            sys.stdout.flush()
        except Exception:
            pass
        return
    exec(code, g)
    name = sys.argv[3]
    target = g["Solution"]() if "class Solution" in src and "Solution" in g else None
    fn = getattr(target, name, None) if target is not None else g.get(name)
    if fn is None:
        raise NameError("the program defines no %s" % name)
    got = fn(*args)
    if isinstance(got, tuple):
        got = list(got)
    ok = bool(got == expected)
    side("R " + json.dumps({"ok": ok, "got": repr(got)[:200]}))

main()
)PY";
  return kSource;
}

}  // namespace skipkv::eval
