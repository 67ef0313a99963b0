#!/bin/sh
# test_function_length.sh — no function of samples/ or tools/ is longer than 200 lines (README "Standards":
# one that long does several things; split it where it reads better). A function's lines run from the
# line of its name to its closing brace. Found by a scan of each C, C++ or CUDA source with comments,
# strings, character literals and preprocessor lines blanked: a brace at file level whose text since the
# previous `;` or `}` names something called (`name(`) and is no struct, union, enum, typedef or
# initializer (`= {`) opens a function body. The scan checks itself first on a made-up source.
# Run from the repository root; ROOT= to check another tree.
set -u
ROOT=${ROOT:-.}
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 0; }
python3 - "$ROOT" <<'PY'
import os, re, subprocess, sys
root = sys.argv[1]
LIMIT = 200
SRC = (".c", ".h", ".cu", ".cuh", ".cpp")
# Known exceptions, each to be split by the change named (remove the line when it lands).
EXCEPTIONS = {
    ("tools/dpmem_report.c", "print_run"),    # issue 44: being split on another branch
    ("samples/llama/train.c", "train_run"),   # issue 44: being split on another branch (the ranks layer)
}

def blank(src):
    """src with comments, string and character literals blanked (newlines kept, the quotes left),
    and preprocessor lines (with their continuations) emptied."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i); j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2); j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j])); i = j
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            j = min(j, n)
            out.append(c + " " * (j - i - 1) + (c if j < n and src[j] == c else "")); i = j + 1
        else:
            out.append(c); i += 1
    lines = "".join(out).split("\n")
    k = 0
    while k < len(lines):
        if lines[k].lstrip().startswith("#"):
            while True:
                cont = lines[k].rstrip().endswith("\\")
                lines[k] = ""
                if not cont or k + 1 >= len(lines): break
                k += 1
        k += 1
    return "\n".join(lines)

def functions(src):
    """(name, first line, last line) of every function body at file level (extern "C" blocks are no level)."""
    s = blank(src)
    found, stack, depth, head_start, line = [], [], 0, 0, 1
    for i, c in enumerate(s):
        if c == "\n":
            line += 1
        elif c == ";" and depth == 0:
            head_start = i + 1
        elif c == "{":
            if depth == 0:
                head = s[head_start:i]
                if re.fullmatch(r'\s*extern\s*"\s*"\s*', head):
                    stack.append(None); head_start = i + 1
                    continue
                m = re.search(r"([A-Za-z_]\w*)\s*\(", head)
                fn = bool(m) and not re.match(r"\s*(typedef|struct|union|enum)\b", head) and "=" not in head[:m.start()]
                stack.append((m.group(1), line - head[m.start():].count("\n")) if fn else False)
            else:
                stack.append(False)
            depth += 1
        elif c == "}" and stack:
            top = stack.pop()
            if top is None:
                head_start = i + 1
                continue
            depth -= 1
            if depth == 0:
                if top: found.append((top[0], top[1], line))
                head_start = i + 1
    return found

# The scan on a made-up source: a function of LIMIT + 1 lines with braces in strings, characters,
# comments and macros, a struct, an initializer and an extern "C" block around a short function.
body = "\n".join(['    x += "}{"[0] + \'}\'; /* } */ // {'] * (LIMIT - 1))
fake = ('#define OPEN {\nstruct S { int a; };\nstatic const int t[] = { 1, 2 };\n'
        'extern "C" {\nstatic int short_one(void) { return 0; }\n}\n'
        'int long_one(int x)\n{\n' + body + '\n}\nint after(void) { return 1; }\n')
got = {n: b - a + 1 for n, a, b in functions(fake)}
want = {"short_one": 1, "long_one": LIMIT + 2, "after": 1}
if got != want:
    print(f"FAIL the scan itself: found {got}, expected {want}")
    sys.exit(1)

try:
    files = subprocess.run(["git", "-C", root, "ls-files", "samples", "tools"], capture_output=True, text=True,
                           check=True).stdout.split()
except (OSError, subprocess.CalledProcessError):
    files = [os.path.relpath(os.path.join(d, f), root) for top in ("samples", "tools")
             for d, _, fs in os.walk(os.path.join(root, top)) for f in fs]
files = sorted(f for f in files if f.endswith(SRC))
bad, n_fn, seen = [], 0, set()
for f in files:
    for name, a, b in functions(open(os.path.join(root, f), encoding="utf-8", errors="replace").read()):
        n_fn += 1
        if (f, name) in EXCEPTIONS:
            seen.add((f, name)); continue
        if b - a + 1 > LIMIT:
            bad.append(f"{f}:{a}: {name} is {b - a + 1} lines (at most {LIMIT})")
for f, name in sorted(EXCEPTIONS - seen):
    print(f"note: the exception {f} {name} is no longer long or gone: remove it from the list")
for f, name in sorted(seen):
    for nm, a, b in functions(open(os.path.join(root, f), encoding="utf-8", errors="replace").read()):
        if nm == name and b - a + 1 <= LIMIT:
            print(f"note: {f} {name} is {b - a + 1} lines now: remove it from the exceptions")
for b in bad: print("FAIL", b)
if bad: sys.exit(1)
print(f"ok   {n_fn} functions in {len(files)} files of samples/ and tools/, none over {LIMIT} lines"
      f" ({len(seen)} known exceptions)")
PY
