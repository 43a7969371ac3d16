"""Fixtures shared by the test files (real MariaDB servers, see dbcluster.py)
and the report: the numbers the scenario tests collect, printed at the end of
the run (also with -q, where test output is captured)."""

import os

import pytest

from dbcluster import OPERATOR_PASSWORD, REPL_PASSWORD, ROOT_PASSWORD, Cluster, SetupError, World, argv_leaks, read_argv_log

REPORT: list[str] = []


def pytest_terminal_summary(terminalreporter):
    if REPORT:
        terminalreporter.section("script scenarios")
        for line in REPORT:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def world():
    try:
        w = World()
    except SetupError as e:
        pytest.fail(f"cannot set up MariaDB servers: {e}")
    REPORT.append(f"server: {w.kind.name} ({w.kind.flavor}), "
                  + (f"from the root file system {w.kind.root}" if w.kind.root else "installed on this host"))
    REPORT.append(f"my.cnf: hook's rendered {w.kind.flavor} my.cnf + added by the harness: "
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


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "all_servers: runs against every server the suite knows (MYSQL_HOOK_SERVER), not only MariaDB 10.11")


# The suite runs on MariaDB 10.11 whole. On another server (MySQL 9.7, MariaDB
# 11.8) it runs the tests marked all_servers: those of the operations ported to
# the agent (issue 32), whose code is the same for every flavor and server, and
# the role-change tests of the scripts that passed there (test_roles.py). What is
# left out is said, test by test.
LEFT_OUT: list[str] = []


def pytest_collection_modifyitems(config, items):
    from dbcluster import SERVER_KIND_NAME
    select_for_server(config, items, SERVER_KIND_NAME)
    select_shard(items)


def select_shard(items):
    """MYSQL_HOOK_SHARD=K/N: run every N-th test from the K-th (1-based), so N
    processes with K = 1..N run the selection between them, each test once
    (tests/real_servers.rs runs them at the same time). Neighbouring tests, often
    alike in length, go to different shards."""
    spec = os.environ.get("MYSQL_HOOK_SHARD")
    if not spec:
        return
    try:
        k, n = (int(x) for x in spec.split("/"))
        if not 1 <= k <= n:
            raise ValueError
    except ValueError:
        raise pytest.UsageError(f"MYSQL_HOOK_SHARD={spec!r}: expected K/N with 1 <= K <= N") from None
    total = len(items)
    items[:] = items[k - 1::n]
    REPORT.append(f"shard {k}/{n}: {len(items)} of the {total} tests selected")


def select_for_server(config, items, server):
    # MYSQL_HOOK_ALL_TESTS=1: every test on any server, to see what a script's
    # other branch does before it is marked (never set by the suites of cargo test).
    if server == "mariadb" or os.environ.get("MYSQL_HOOK_ALL_TESTS") == "1":
        return
    keep, left = [], []
    for item in items:
        (keep if item.get_closest_marker("all_servers") else left).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = keep
        LEFT_OUT.extend(item.nodeid for item in left)
        REPORT.append(f"{server}: {len(keep)} tests run; {len(left)} left out, whose operations are "
                      "not yet proven on this server (issues 32, 33)")
