"""Repository-wide pytest hooks (loaded for tests/ and notebooks/ alike)."""
# The budget the book holds each chapter to: at most 45 s top to bottom on a 2-core machine (issue 20).
# ---- how long each notebook took under nbval (CI prints it; the book's budget is 45 s per notebook) ----------
_notebook_seconds: dict = {}


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::")[0]
    if path.endswith(".ipynb") and report.when in ("setup", "call", "teardown"):
        _notebook_seconds[path] = _notebook_seconds.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if not _notebook_seconds:
        return
    terminalreporter.section("notebook run times (nbval, kernel start included)")
    for path, seconds in sorted(_notebook_seconds.items()):
        terminalreporter.write_line(f"{seconds:7.1f} s  {path}")
    terminalreporter.write_line(f"{sum(_notebook_seconds.values()):7.1f} s  all notebooks")
