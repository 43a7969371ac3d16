"""Collects the numbers the scenario tests report and prints them at the end
of the run (also with -q, where test output is captured)."""

REPORT: list[str] = []


def pytest_terminal_summary(terminalreporter):
    if REPORT:
        terminalreporter.section("mariadb script scenarios")
        for line in REPORT:
            terminalreporter.write_line(line)
