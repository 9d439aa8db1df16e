#!/usr/bin/env python3
"""Fails when two source files that may share a unity batch both define the
same name with internal linkage (in an anonymous namespace, or static).

In a unity build (NPC_UNITY_BUILD, on by default) a target's sources are
compiled several to a translation unit. Two such names with one signature
are a compile error, but two functions of one name with different
parameters become overloads, and a call in one file can silently bind to the
other file's function. So such names must differ within a target; this
check looks at every folder whose sources are built together.

    tools/check-unity-names.py [SOURCE_DIR]

Prints file:line: name for each clash; exit status 1 when there is one.
"""
import re
import sys
from collections import defaultdict
from pathlib import Path

# The folders whose files are compiled together (a target, or the layers of
# one library each), relative to the source directory.
# (In src/, the files src/CMakeLists.txt compiles alone are checked with
# their layer's folder all the same.)
GROUPS = [
    "tests/unit", "tests/e2e", "tests/reliability", "tests/bundle",
    "tests/standin", "tests/support", "tests/fuzz", "tests/install",
    "tools/standin/cc", "tools/standin/train", "tools/standin/common",
    "bench/src",
    "src/util", "src/config", "src/storage", "src/cache", "src/compile",
    "src/cluster", "src/launcher", "src/bundle", "src/cli",
]

# GoogleTest finds a value's printer by this name: overloads of it, one per
# parameter type, are the point.
OVERLOADS_BY_DESIGN = {"PrintTo"}

LITERAL = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'')
COMMENT = re.compile(r"//.*")
# A name defined at namespace scope: a variable or function (the name before
# "(", "=", "{" or "["), or a type, or an alias.
TYPE_DEF = re.compile(r"^(?:class|struct|union|enum(?:\s+class)?)\s+([A-Za-z_]\w*)\s*(?:final\s*)?(?:[:{]|$)")
ALIAS = re.compile(r"^using\s+([A-Za-z_]\w*)\s*=")
VALUE_OR_FUNCTION = re.compile(r"^(?!return\b|using\b|namespace\b|template\b|typedef\b|friend\b|TEST|INSTANTIATE|#)"
                               r"[\w:<>,\s*&\[\]]*?[\s*&]([A-Za-z_]\w*)\s*(?:\(|=|\{|\[)")


def internal_names(path):
    """(line, name, text) of each name defined directly in an anonymous namespace,
    and of each static function or variable at namespace scope."""
    names = []
    depth = 0
    anonymous_depths = []  # depths at which an anonymous namespace's body is
    namespace_depths = {0}  # depths whose scope is a namespace
    pending_namespace = None
    for number, raw in enumerate(path.read_text(errors="replace").splitlines(), 1):
        line = COMMENT.sub("", LITERAL.sub('""', raw)).rstrip()
        stripped = line.strip()
        at_namespace_scope = depth in namespace_depths
        if at_namespace_scope and stripped:
            in_anonymous = bool(anonymous_depths) and anonymous_depths[-1] == depth
            is_static = stripped.startswith("static ")
            if in_anonymous or is_static:
                text = stripped[len("static "):] if is_static else stripped
                for pattern in (TYPE_DEF, ALIAS, VALUE_OR_FUNCTION):
                    match = pattern.match(text)
                    if match:
                        # An alias may be declared again as the same type.
                        same_everywhere = text if pattern is ALIAS else None
                        names.append((number, match.group(1), same_everywhere))
                        break
            if re.match(r"^namespace\s*\{", stripped):
                pending_namespace = "anonymous"
            elif re.match(r"^(?:inline\s+)?namespace\s+[\w:]+\s*\{", stripped):
                pending_namespace = "named"
        for char in line:
            if char == "{":
                depth += 1
                if pending_namespace:
                    namespace_depths.add(depth)
                    if pending_namespace == "anonymous":
                        anonymous_depths.append(depth)
                    pending_namespace = None
            elif char == "}":
                if anonymous_depths and anonymous_depths[-1] == depth:
                    anonymous_depths.pop()
                namespace_depths.discard(depth) if depth else None
                depth = max(depth - 1, 0)
    return names


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
    clashes = 0
    for group in GROUPS:
        folder = root / group
        if not folder.is_dir():
            continue
        where = defaultdict(list)
        for path in sorted(folder.glob("*.c*")):
            if path.suffix not in (".cpp", ".cc", ".cxx"):
                continue
            for number, name, text in internal_names(path):
                if name not in OVERLOADS_BY_DESIGN:
                    where[name].append((path, number, text))
        for name, places in sorted(where.items()):
            files = {path for path, _, _ in places}
            texts = {text for _, _, text in places}
            if len(files) < 2 or (len(texts) == 1 and None not in texts):
                continue
            clashes += 1
            for path, number, _ in places:
                print(f"{path.relative_to(root)}:{number}: {name} is also defined in another file of {group}/ "
                      "(unity builds compile them together: give one a name of its own)")
    if clashes:
        print(f"check-unity-names: {clashes} name(s) defined in more than one file of a folder", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
