"""The examples of README.md and docs/*.md: finding them and running them.

A page's examples are its fenced code blocks of two kinds, run in the
order they appear, all of one page in one fresh Python namespace and one
fresh temporary working directory (so a later block sees what an earlier
one defined or wrote):

- ```` ```python ```` blocks run as written. A trailing comment on a
  print() call, or on any statement that writes to standard output, is
  that output: ``print(x)  # b'bob'`` must print exactly ``b'bob'``. Any
  other statement may carry any comment (``db.flush()  # memtable to a
  table``).
- ```` ```console ```` blocks are shell sessions: a line starting with
  ``$ `` is a command (run by bash, ``lsmkv`` being this checkout's
  command line; a trailing ``\\`` continues it on the next line), and the
  lines up to the next ``$ `` are its output (standard output and error
  as a terminal shows them).

In an output shown either way, ``...`` stands for any text within a line,
and a line holding only ``...`` for any number of lines: the places where a
run differs (times, sizes, temporary names).

Marks are HTML comments (invisible on a rendered page) on the lines just
before a block (blank lines between are allowed):

- ``<!-- not run: REASON -->``: the block needs what a test machine cannot
  give (a Spark cluster, a remote broker); the reason is required.
- ``<!-- needs: kafka -->``: the block runs against the embedded Kafka
  broker, started for the page; ``localhost:9092`` in the page's blocks
  means that broker. ``<!-- needs: spark -->``: the block starts a local
  SparkSession. Such pages run in tests marked ``kafka`` or ``spark``.

Blocks of other languages (``sh``, plain fences, indented text) are not
run. Run as a script, this module executes one page's blocks (a JSON list
on standard input) and writes what each did as JSON to the file named by
its argument; tests/test_docs_examples.py is the test that does so.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import subprocess
import sys
import tokenize
import traceback
from dataclasses import dataclass, field

RUN_LANGUAGES = ("python", "console")
NEEDS = ("kafka", "spark")
KAFKA_ADDRESS = "localhost:9092"

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
_MARK = re.compile(r"<!--\s*(?P<kind>not[ -]?run|needs)\b(?P<rest>.*?)-->", re.I | re.S)


@dataclass
class Mark:
    kind: str  # "not run" or "needs"
    text: str  # what follows the colon, stripped
    line: int  # 1-based line of the comment
    well_formed: bool


@dataclass
class Block:
    page: str
    language: str
    code: str
    line: int  # 1-based line of the block's first code line
    marks: list[Mark] = field(default_factory=list)

    @property
    def skip_reason(self) -> str | None:
        for mark in self.marks:
            if mark.kind == "not run":
                return mark.text
        return None

    @property
    def needs(self) -> set[str]:
        return {m.text for m in self.marks if m.kind == "needs"}

    @property
    def runs(self) -> bool:
        return self.language in RUN_LANGUAGES and self.skip_reason is None

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def parse_marks(text: str, first_line: int) -> list[Mark]:
    marks = []
    for m in _MARK.finditer(text):
        kind = "not run" if m.group("kind").lower().startswith("not") else "needs"
        rest = m.group("rest").strip()
        well_formed = rest.startswith(":") and bool(rest[1:].strip())
        marks.append(Mark(kind, rest[1:].strip() if rest.startswith(":") else rest,
                          first_line + text.count("\n", 0, m.start()), well_formed))
    return marks


def parse_page(path: str, name: str | None = None) -> tuple[list[Block], list[Mark]]:
    """The fenced blocks of a Markdown file, each with the marks just before
    it, and the marks that stand before no block (orphans)."""
    name = name or os.path.basename(path)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks: list[Block] = []
    orphans: list[Mark] = []
    pending: list[Mark] = []
    comment: list[str] | None = None  # lines of an HTML comment being read
    comment_start = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if comment is None and fence:
            info = fence.group("info").strip().split()
            language = info[0].lower() if info else ""
            marker = fence.group("fence")
            body: list[str] = []
            j = i + 1
            while j < len(lines) and not (lines[j].strip().startswith(marker[0] * len(marker))
                                          and not lines[j].strip().strip(marker[0])):
                body.append(lines[j][len(fence.group("indent")):] if lines[j].startswith(fence.group("indent")) else lines[j])
                j += 1
            blocks.append(Block(name, language, "\n".join(body) + "\n", i + 2, pending))
            pending = []
            i = j + 1
            continue
        if comment is not None or line.lstrip().startswith("<!--"):
            if comment is None:
                comment, comment_start = [], i + 1
            comment.append(line)
            if "-->" in line:
                marks = parse_marks("\n".join(comment), comment_start)
                pending.extend(marks)
                comment = None
            i += 1
            continue
        if line.strip() and pending:
            orphans.extend(pending)  # text between a mark and the next block
            pending = []
        i += 1
    orphans.extend(pending)
    return blocks, orphans


# -- comparing output -------------------------------------------------------------

def output_pattern(expected: str) -> re.Pattern[str]:
    """``expected`` as a pattern: ``...`` is any text within a line, a line
    of only ``...`` any number of lines."""
    parts = []
    for line in expected.rstrip("\n").split("\n"):
        if line.strip() == "...":
            parts.append("(?:[^\n]*\n)*?")
        else:
            parts.append("[^\n]*?".join(re.escape(p) for p in line.split("...")) + "\n")
    return re.compile("".join(parts))


def output_matches(expected: str, actual: str) -> bool:
    actual = actual.rstrip("\n") + "\n" if actual.strip("\n") else ""
    return output_pattern(expected).fullmatch(actual) is not None


def trailing_comments(code: str) -> dict[int, str]:
    """{line: text} of the comments that follow code on their line."""
    out: dict[int, str] = {}
    code_lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.COMMENT:
            if tok.start[0] in code_lines:
                out[tok.start[0]] = tok.string[1:].strip()
        elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                              tokenize.ENDMARKER, tokenize.ENCODING):
            code_lines.update(range(tok.start[0], tok.end[0] + 1))
    return out


_COMPOUND = (ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While, ast.If, ast.Try,
             ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Match)
if hasattr(ast, "TryStar"):
    _COMPOUND += (ast.TryStar,)


def _statements_on(code: str, line: int) -> list[ast.stmt]:
    return [node for node in ast.walk(ast.parse(code))
            if isinstance(node, ast.stmt) and not isinstance(node, _COMPOUND)
            and node.lineno <= line <= node.end_lineno]


def statement_lines(code: str, line: int) -> range:
    """The lines of the simple statements on ``line`` (a compound
    statement's header line: that line alone)."""
    spans = [(node.lineno, node.end_lineno) for node in _statements_on(code, line)]
    if not spans:
        return range(line, line + 1)
    return range(min(s for s, _ in spans), max(e for _, e in spans) + 1)


def is_print(code: str, line: int) -> bool:
    """Whether a statement on ``line`` is a call of print()."""
    return any(isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
               and isinstance(node.value.func, ast.Name) and node.value.func.id == "print"
               for node in _statements_on(code, line))


@dataclass
class Mismatch:
    where: str
    expected: str
    actual: str

    def __str__(self) -> str:
        return f"{self.where}: shows {self.expected!r}, printed {self.actual!r}"


def python_output_checks(block: Block, printed: list[tuple[int | None, str]]) -> tuple[int, list[Mismatch]]:
    """Compare what each commented statement of ``block`` printed (pieces
    of output with the page line that wrote them) with its comment:
    (statements checked, mismatches)."""
    checked, mismatches = 0, []
    printed = [(None if at is None else at - block.line + 1, text) for at, text in printed]  # page lines to block lines
    for line, comment in trailing_comments(block.code).items():
        lines = statement_lines(block.code, line)
        actual = "".join(text for at, text in printed if at in lines)
        if not actual and not is_print(block.code, line):
            continue  # a statement that prints nothing: its comment describes it
        checked += 1
        if not output_matches(comment, actual):
            mismatches.append(Mismatch(f"{block.page}:{block.line + line - 1}", comment, actual.rstrip("\n")))
    return checked, mismatches


def console_commands(block: Block) -> list[tuple[int, str, str]]:
    """(line, command, expected output) of each ``$ `` command of a console block."""
    commands: list[list] = []
    continued = False
    for n, line in enumerate(block.code.rstrip("\n").split("\n")):
        if continued:
            commands[-1][1] += "\n" + line
            continued = line.endswith("\\")
        elif line.startswith("$ "):
            commands.append([block.line + n, line[2:], ""])
            continued = line.endswith("\\")
        elif commands:
            commands[-1][2] += line + "\n"
        elif line.strip():
            raise ValueError(f"{block.name}: a console block starts with a `$ ` command, not {line!r}")
    return [(line, cmd, out) for line, cmd, out in commands]


# -- running (in a child process) --------------------------------------------------

class _AttributingStdout(io.TextIOBase):
    """Standard output that remembers which line of the running block wrote
    each piece (the innermost frame of the block's code)."""

    def __init__(self) -> None:
        self.filename = ""
        self.pieces: list[tuple[int | None, str]] = []

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        frame, line = sys._getframe(1), None
        while frame is not None:
            if frame.f_code.co_filename == self.filename:
                line = frame.f_lineno
                break
            frame = frame.f_back
        self.pieces.append((line, s))
        return len(s)

    def flush(self) -> None:
        pass


def _run_python(block: dict, namespace: dict, stdout: _AttributingStdout) -> dict:
    stdout.filename, stdout.pieces = block["page"], []
    code = "\n" * (block["line"] - 1) + block["code"]  # tracebacks and outputs name the page's lines
    real = sys.stdout
    sys.stdout = stdout
    try:
        exec(compile(code, stdout.filename, "exec"), namespace)
        error = None
    except BaseException:  # noqa: BLE001  (reported to the test)
        error = traceback.format_exc()
    finally:
        sys.stdout = real
    return {"printed": stdout.pieces, "error": error}


def _run_console(block: dict, commands: list[tuple[int, str, str]], env: dict) -> dict:
    """Run the commands in one bash, each one's output separated by a
    marker line, so ``$?`` and variables carry from one to the next."""
    marker = "@@docs-example-command@@"
    script = ["status=0"]
    for _, cmd, _ in commands:
        script += [f"echo '{marker}'", "(exit $status)", cmd, "status=$?"]
    proc = subprocess.run(["bash", "-c", "\n".join(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=env, timeout=600)
    outputs = proc.stdout.split(marker + "\n")[1:]
    outputs += [""] * (len(commands) - len(outputs))
    return {"outputs": outputs, "error": None}


def run_blocks(blocks: list[dict]) -> list[dict]:
    namespace: dict = {"__name__": "__main__"}
    stdout = _AttributingStdout()
    env = dict(os.environ)
    results = []
    for block in blocks:
        if block["language"] == "python":
            result = _run_python(block, namespace, stdout)
        else:
            result = _run_console(block, block["commands"], env)
        results.append(result)
        if result["error"]:
            break  # later blocks build on this one
    return results


def main() -> None:
    blocks = json.load(sys.stdin)
    results = run_blocks(blocks)
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
