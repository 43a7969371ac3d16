"""Fixtures shared by the test files (real MariaDB servers, see dbcluster.py)
and the report: the numbers the scenario tests collect, printed at the end of
the run (also with -q, where test output is captured)."""

import pytest

from dbcluster import OPERATOR_PASSWORD, REPL_PASSWORD, ROOT_PASSWORD, Cluster, SetupError, World, argv_leaks, read_argv_log

REPORT: list[str] = []


def pytest_terminal_summary(terminalreporter):
    if REPORT:
        terminalreporter.section("mariadb script scenarios")
        for line in REPORT:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def world():
    try:
        w = World()
    except SetupError as e:
        pytest.fail(f"cannot set up MariaDB servers: {e}")
    REPORT.append("my.cnf: hook's rendered MariaDB my.cnf + added by the harness: "
                  + (", ".join(f"{k} = {v}" for k, v in w.added_options.items()) or "nothing"))
    yield w
    # Every command line any script executed during the whole run, not only in
    # test_no_password_on_any_command_line: none may hold a password.
    records = read_argv_log(w.argv_log)
    leaks = argv_leaks(records, [ROOT_PASSWORD, REPL_PASSWORD, OPERATOR_PASSWORD])
    w.close()
    assert not leaks, f"{len(leaks)} of {len(records)} recorded execs hold a secret:\n" + "\n".join(leaks[:20])


@pytest.fixture
def cluster(world, request):
    c = Cluster(world, request.node.name)
    try:
        yield c
    finally:
        c.close()




@pytest.fixture(scope="session")
def store(world):
    """A real S3 server (MinIO) and the AWS CLI v2 the backup Jobs run."""
    from objstore import ObjectStore
    try:
        s = ObjectStore(world.root)
    except SetupError as e:
        pytest.fail(f"cannot set up the S3 server: {e}")
    yield s
    s.close()
