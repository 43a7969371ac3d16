"""Unit tests of the pure bash functions of hooks/scripts/common.sh, for BOTH
flavors, with no server: common.sh is sourced with FLAVOR=mysql or mariadb,
a PODS list nobody listens on and a dummy password.  The MySQL 8.4 branch
never runs against a server here, so everything it decides from text it has
already read (GTID set arithmetic, candidate choice, errant members, the
process list filter, the statements it builds, the result line) is tested
here; the MariaDB branch is also exercised end to end by the other files."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from dbcluster import AGENT, SCRIPTS

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "aaaaaaaa-0000-0000-0000-000000000002"
U3 = "bbbbbbbb-0000-0000-0000-000000000003"


def sh(flavor: str, body: str, **env) -> subprocess.CompletedProcess:
    """Source common.sh and run BODY; the EXIT trap must not print a result
    line unless BODY calls finish/fail."""
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "FLAVOR": flavor,
            "PODS": "db-0=127.0.0.1:9 db-1=[::1]:3307 db-2=db-2.db.ns.svc:3306",
            "MYSQL_ROOT_PASSWORD": "x", "TERMINATION_LOG": "/dev/null", "TMPDIR": "/tmp",
            # the GTID functions are the agent's `gtid` (agent/src/gtid_calc.rs)
            "AGENT_BIN": str(AGENT)}
    full.update(env)
    script = f'. "{SCRIPTS}/common.sh"\nRESULT_DONE=1\n{body}\n'
    return subprocess.run(["bash"], input=script, env=full, capture_output=True, text=True, timeout=120)


def out(flavor: str, body: str, **env) -> str:
    r = sh(flavor, body, **env)
    assert r.returncode == 0, r.stderr
    return r.stdout


def ok(flavor: str, cond: str) -> bool:
    r = sh(flavor, f"if {cond}; then echo yes; else echo no; fi")
    assert r.returncode == 0, r.stderr
    return r.stdout.strip() == "yes"


BOTH = pytest.mark.parametrize("flavor", ["mysql", "mariadb"])


# ------------------------------------------------------------ sourcing, env

@BOTH
def test_sourcing_needs_no_server(flavor):
    r = sh(flavor, "echo sourced; pod_host db-1; echo; pod_port db-1; echo; pod_ordinal db-2")
    assert r.returncode == 0 and r.stdout == "sourced\n::1\n3307\n2", r
    assert r.stderr == ""


@BOTH
def test_bad_semisync_acks_is_reported(flavor):
    r = sh(flavor, "echo never", SEMISYNC_ACKS="0")
    assert r.returncode == 1 and json.loads(r.stdout)["reason"] == "bad-env", r


def test_bad_flavor_is_reported():
    r = sh("oracle", "echo never")
    assert r.returncode == 1 and json.loads(r.stdout)["reason"] == "bad-env"


@BOTH
def test_result_line_keeps_promoted_and_reason_when_truncated(flavor):
    body = ('r_str from db-0; promoted db-1; r_arr big ' + " ".join(f"member-{i:04d}-{'x' * 40}" for i in range(120))
            + '; RESULT_DONE=0; fail apply-timeout "boom"')
    r = sh(flavor, body)
    line = json.loads(r.stdout)
    assert r.returncode == 1 and len(r.stdout) < 4096
    assert line["truncated"] is True and line["promoted"] == "db-1" and line["reason"] == "apply-timeout"
    assert line["from"] == "db-0" and "big" not in line


@BOTH
def test_script_failed_line_keeps_promoted(flavor):
    r = sh(flavor, "RESULT_DONE=0; r_str from db-0; promoted db-2; false")
    line = json.loads(r.stdout)
    assert r.returncode == 1 and line["reason"] == "script-failed" and line["promoted"] == "db-2", r.stdout


@BOTH
def test_tsv_fields_keeps_empty_fields(flavor):
    r = out(flavor, 'tsv_fields "$L"; echo "${#TSV[@]}|${TSV[2]}|${TSV[3]}"', L="a\tb\t\tNULL")
    assert r.strip() == "4||NULL"


# ------------------------------------------------------------ MySQL GTID sets

def test_mysql_gtid_text():
    """The scripts' GTID functions, computed by the agent's `gtid` (agent/src/gtid_calc.rs)."""
    assert out("mysql", f'gtid_union "{U1.upper()}:1-5:7,\n {U1}:6"') == f"{U1}:1-7"
    # 8.4 tags: a tag token switches the tag of the intervals after it
    assert out("mysql", f'gtid_union "{U2}:2:TAG1:1-3:5,{U2}:tag1:4"') == f"{U2}:2:tag1:1-5", "as MySQL prints it"
    assert out("mysql", f'gtid_union "{U1}:1-3" "" "{U1}:4-9,{U2}:1"') == f"{U1}:1-9,{U2}:1"
    assert out("mysql", f'gtid_subtract "{U1}:21-57" "{U1}:20-25,{U1}:30,{U1}:40-60"') == f"{U1}:26-29:31-39"
    assert out("mysql", f'gtid_subtract "{U1}:1-10:t:1-5" "{U1}:t:2"') == f"{U1}:1-10:t:1:3-5"
    assert out("mysql", f'gtid_subtract "{U1}:1-3" "{U1}:1-9"') == ""
    # the manual's GTID_SUBSET examples (RM 14.18.2)
    assert ok("mysql", f'gtid_subset "{U1}:23" "{U1}:21-57"')
    assert not ok("mysql", f'gtid_subset "{U1}:20-25" "{U1}:21-57"')
    assert ok("mysql", 'gtid_subset "" ""') and ok("mysql", f'gtid_subset "" "{U1}:1"')
    assert not ok("mysql", f'gtid_subset "{U1}:1" ""')
    assert not ok("mysql", f'gtid_subset "{U1}:t:1" "{U1}:1"'), "a tagged GTID is another transaction"
    # a long-lived cluster: many sources and intervals, far beyond 1024 bytes
    big = ",".join(f"{i:08x}-0000-0000-0000-000000000000:1-{1000 + i}:{2000 + i}-{3000 + i}" for i in range(60))
    assert len(big) > 3000
    assert ok("mysql", f'gtid_subset "{big}" "{big},{U1}:1"')
    assert not ok("mysql", f'gtid_subset "{big},{U1}:1" "{big}"')


def _rand_set(rng):
    s = set()
    for u in rng.sample([U1, U2, U3], rng.randint(0, 3)):
        tag = rng.choice(["", "", "t"])
        for _ in range(rng.randint(1, 3)):
            a = rng.randint(1, 30)
            b = a + rng.randint(0, 6)
            s |= {(u, tag, n) for n in range(a, b + 1)}
    return s


def _text(s, rng):
    """Some GTID set text for set s (shuffled, split, sometimes upper case)."""
    parts = [f"{u.upper() if rng.random() < 0.2 else u}:{t + ':' if t else ''}{n}" for u, t, n in s]
    rng.shuffle(parts)
    return ",".join(parts)


def test_mysql_gtid_sets_against_a_model():
    """Property test: subset / subtract / union of random tagged sets agree
    with Python set arithmetic (150 cases)."""
    rng = random.Random(14)
    cases = [(_rand_set(rng), _rand_set(rng)) for _ in range(150)]
    cases += [(a, a | b) for a, b in cases[:30]]            # make true subsets common
    body = []
    for a, b in cases:
        ta, tb = _text(a, rng), _text(b, rng)
        body.append(f'gtid_subset "{ta}" "{tb}" && printf "1|" || printf "0|"; '
                    f'gtid_subtract "{ta}" "{tb}"; printf "|"; gtid_union "{ta}" "{tb}"; echo')
    lines = out("mysql", "\n".join(body)).splitlines()
    assert len(lines) == len(cases)

    def parse(text):
        s = set()
        for e in filter(None, text.split(",")):
            toks = e.split(":")
            u, tag = toks[0], ""
            for t in toks[1:]:
                if t[0].isdigit():
                    lo, _, hi = t.partition("-")
                    s |= {(u, tag, n) for n in range(int(lo), int(hi or lo) + 1)}
                else:
                    tag = t
        return s

    for (a, b), line in zip(cases, lines):
        sub, diff, union = line.split("|")
        assert sub == ("1" if a <= b else "0"), (a, b)
        assert parse(diff) == a - b, (a, b, diff)
        assert parse(union) == a | b, (a, b, union)


# ------------------------------------------------------------ MariaDB GTID lists

def test_mariadb_gtid_lists():
    assert out("mariadb", 'mdb_pos_max "0-1-5,1-2-3" "0-2-9,1-2-1"') == "0-2-9,1-2-3"
    assert out("mariadb", 'gtid_union "0-1-5,0-2-7" "0-1-9,1-3-2" ""') == "0-1-9,0-2-7,1-3-2"
    assert ok("mariadb", 'gtid_subset "0-1-5" "0-1-9,0-2-1"')
    assert not ok("mariadb", 'gtid_subset "0-1-5,0-3-1" "0-1-9"')
    assert ok("mariadb", 'gtid_ge "0-2-10" "0-1-9"') and not ok("mariadb", 'gtid_ge "0-2-8" "0-1-9"')
    assert out("mariadb", 'gtid_subtract "0-1-20,0-9-21" "0-1-20"') == "0-9-21"


# ------------------------------------------------------------ values from stores (30.2)

POISON = "BASH_VERSINFO[$(touch${IFS}%s)0]"


@BOTH
def test_gtid_functions_refuse_text_that_is_not_a_gtid(flavor, tmp_path):
    """Issue 30.2: a value that bash would evaluate (and so run a command
    from) is refused as `corrupt` by every GTID function, never evaluated."""
    calls = ["gtid_within", "gtid_subset", "gtid_contains", "gtid_ge", "gtid_subtract", "gtid_own_errant"]
    calls += ["gtid_union"] + (["mdb_pos_max"] if flavor == "mariadb" else [])
    good = f"{U1}:1-5" if flavor == "mysql" else "0-1-5"
    for i, call in enumerate(calls):
        mark = tmp_path / f"mark-{i}"
        bad = ("0-1-" if flavor == "mariadb" else f"{U1}:1-") + POISON % mark
        # through the environment: the test's own script text must not expand it
        for args in ('"$BAD" "$GOOD" 1', '"$GOOD" "$BAD" 1'):
            r = sh(flavor, f"{call} {args}; echo never", BAD=bad, GOOD=good)
            assert not mark.exists(), f"{call} {args}: the command ran"
            # The script ends; its result says `corrupt` (a refusal inside a
            # command substitution ends the script as it returns).
            assert r.returncode != 0 and "never" not in r.stdout, (call, r)
            lines = r.stdout.splitlines()
            assert not lines or json.loads(lines[-1])["reason"] == "corrupt", (call, r)


@BOTH
def test_read_positions_takes_numbers_and_gtids_only(flavor, tmp_path):
    good = f"{U1}:1-5" if flavor == "mysql" else "0-1-5"
    ok_text = f"dump-gtid {good}\npitr-from 1700000000\nbinlogs-until 1700000100\nbinlogs-gtid {good}\n"
    (tmp_path / "POSITIONS").write_text(ok_text)
    assert out(flavor, f'read_positions "{tmp_path}"; echo "$POS_PITR_FROM $POS_BINLOGS_GTID"').strip() \
        == f"1700000000 {good}"
    mark = tmp_path / "mark"
    for bad in (POISON % mark, "1+1", "0x10", "-1", "1 2", "", "1" * 19):
        for key in ("pitr-from", "binlogs-until", "dump-gtid", "binlogs-gtid"):
            lines = [ln if not ln.startswith(key + " ") else f"{key} {bad}" for ln in ok_text.splitlines()]
            (tmp_path / "POSITIONS").write_text("\n".join(lines) + "\n")
            rc = out(flavor, f'read_positions "{tmp_path}" && echo 0 || echo $?').strip()
            # an empty GTID text (an empty server) and no binlogs-until are valid
            want = "0" if bad == "" and key != "pitr-from" else "2"
            assert rc == want, (key, bad, rc)
    assert not mark.exists()


# ------------------------------------------------------------ candidates, errant

@BOTH
def test_choose_most_advanced(flavor):
    if flavor == "mysql":
        small, big, other = f"{U1}:1-10", f"{U1}:1-12", f"{U1}:1-10,{U2}:1"
    else:
        small, big, other = "0-1-10", "0-1-12", "0-1-10,0-9-11"
    def choose(sets, order):
        decl = " ".join(f'[{k}]="{v}"' for k, v in sets.items())
        r = sh(flavor, f'CAND_SET=({decl}); choose_most_advanced {" ".join(order)} || echo DIVERGED')
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()
    assert choose({"db-0": small, "db-1": big, "db-2": small}, ["db-0", "db-1", "db-2"]) == "db-1"
    # a tie goes to the first listed (PRIMARY, then ordinal order)
    assert choose({"db-0": big, "db-1": big, "db-2": small}, ["db-0", "db-1", "db-2"]) == "db-0"
    assert choose({"db-2": big, "db-1": big}, ["db-2", "db-1"]) == "db-2"
    # same length, different histories: diverged, never "the longer one"
    assert choose({"db-1": big, "db-2": other}, ["db-1", "db-2"]) == "DIVERGED"
    assert choose({"db-0": small}, ["db-0"]) == "db-0"


@BOTH
def test_split_errant(flavor):
    if flavor == "mysql":
        ex = {"db-0": f"{U1}:1-10", "db-1": f"{U1}:1-10,{U2}:1", "db-2": f"{U1}:1-9"}
        ident = {"db-0": U1, "db-1": U2, "db-2": U3}
    else:
        ex = {"db-0": "0-1-10", "db-1": "0-1-10,0-2-11", "db-2": "0-1-9"}
        ident = {"db-0": "1", "db-1": "2", "db-2": "3"}
    decl = (f'declare -A EXEC=({" ".join(f"[{k}]={v!r}" for k, v in ex.items())}) '
            f'IDENT=({" ".join(f"[{k}]={v!r}" for k, v in ident.items())}); ')
    r = out(flavor, decl + 'split_errant - db-1 db-2; echo "${ERRANT[*]}|${NONERRANT[*]}"')
    assert r.strip() == "db-1|db-2"
    # db-1's own transaction is on the old primary too: legit
    r = out(flavor, decl + 'split_errant "${EXEC[db-1]}" db-1 db-2; echo "${ERRANT[*]}|${NONERRANT[*]}"')
    assert r.strip() == "|db-1 db-2"
    # a sole survivor is trusted
    r = out(flavor, decl + 'split_errant - db-1; echo "${ERRANT[*]}|${NONERRANT[*]}"')
    assert r.strip() == "|db-1"


# ------------------------------------------------------------ statements built

def test_mysql_statements():
    q = out("mysql", "promote_sql 1 true", SEMISYNC_ACKS="2")
    assert q.startswith("STOP REPLICA; RESET REPLICA ALL;")
    assert "rpl_semi_sync_source_wait_for_replica_count=2;" in q
    assert "rpl_semi_sync_source_wait_point=AFTER_SYNC;" in q
    assert "rpl_semi_sync_source_wait_no_replica=ON;" in q
    assert q.endswith("SET GLOBAL read_only=OFF")
    # issue 31.1: super_read_only off, the epoch recorded, then writes
    q = out("mysql", "promote_sql 0 false", EPOCH="7")
    assert q.startswith("SET GLOBAL rpl_semi_sync_source_enabled=OFF; SET GLOBAL super_read_only=OFF; SET SESSION sql_log_bin=0;")
    epoch_at, open_at = q.index("REPLACE INTO _mysqlhook.epoch VALUES (1, 7);"), q.index("SET GLOBAL read_only=OFF")
    assert q.index("super_read_only=OFF") < epoch_at < open_at
    assert "wait_for_replica_count=1;" in out("mysql", "semisync_source_sql true")


def test_mariadb_statements():
    q = out("mariadb", "promote_sql 1 true", SEMISYNC_ACKS="2")
    assert q.startswith("STOP SLAVE; RESET SLAVE ALL;") and "wait_for" not in q, "MariaDB: exactly one ACK"
    assert "rpl_semi_sync_master_enabled=ON;" in q and q.endswith("SET GLOBAL read_only=OFF")
    assert "super_read_only" not in q
    q = out("mariadb", "promote_sql 0 false", EPOCH="3")
    assert q.startswith("SET GLOBAL rpl_semi_sync_master_enabled=OFF; SET SESSION sql_log_bin=0;")
    assert q.index("VALUES (1, 3);") < q.index("SET GLOBAL read_only=OFF") and q.endswith("SET GLOBAL read_only=OFF")
    assert sh("mariadb", "echo never", EPOCH="1;DROP").returncode == 1, "EPOCH is a number"


# ------------------------------------------------------------ backups (issue 19)

@pytest.mark.parametrize("version,stmt", [
    ("8.0.40", "RESET MASTER"), ("8.0.40-log", "RESET MASTER"), ("8.1.0", "RESET MASTER"),
    ("8.2.0", "RESET BINARY LOGS AND GTIDS"), ("8.4.3", "RESET BINARY LOGS AND GTIDS"),
    ("9.1.0", "RESET BINARY LOGS AND GTIDS"), ("5.7.44", "RESET MASTER"),
])
def test_mysql_reset_statement_follows_the_version(version, stmt):
    """Issue 19.11: RESET BINARY LOGS AND GTIDS exists from 8.2 only; 8.0
    and 8.1 know RESET MASTER (removed in 8.4)."""
    assert out("mysql", f"mysql_reset_statement '{version}'") == stmt


@pytest.mark.parametrize("flavor,start,pos,within", [
    ("mariadb", "", "0-1-5", True),
    ("mariadb", "0-1-5", "0-1-5", True),
    ("mariadb", "0-1-3,0-2-5", "0-2-5", True),
    ("mariadb", "0-1-6", "0-1-5", False),
    ("mariadb", "0-1-5,1-1-2", "0-1-9", False),   # a domain the dump lacks
    ("mysql", f"{U1}:1-5", f"{U1}:1-9", True),
    ("mysql", f"{U1}:1-10", f"{U1}:1-9", False),
    ("mysql", "", f"{U1}:1-9", True),
])
def test_gtid_within(flavor, start, pos, within):
    """A binary log that began at START continues a dump at POS."""
    assert ok(flavor, f"gtid_within '{start}' '{pos}'") is within


DATA = Path(__file__).parent / "data"


@pytest.mark.skipif(shutil.which("mariadb-binlog") is None, reason="needs mariadb-binlog (the MariaDB client)")
def test_binlog_start_state_reads_a_gtid_list_folded_over_lines(tmp_path):
    """The first 371 bytes of a binary log that a real pod's backup.sh copied,
    after the role had moved between three servers (the real-server loop's
    scenario 7): its Gtid_list names one GTID per server id, and mariadb-binlog
    folds them over three lines. Read as one line, it was 'no GTID header'
    and every point-in-time restore after a switchover refused to run."""
    f = DATA / "three-servers" / "binlog.000004"
    # (the agent's `binlog-header`: canonical text, sorted by domain and server id)
    assert out("mariadb", f"binlog_start_state '{f}'") == "0-1-1828,0-2-781,0-3-1830"
    # ...and a dump taken at 0-1-1830 (the newest of domain 0) is continued by it.
    assert ok("mariadb", "gtid_within '0-2-781,0-1-1828,0-3-1830' '0-3-1830'")
    # A file that is not a binary log has no header.
    junk = tmp_path / "binlog.000009"
    junk.write_bytes(b"\xfebin" + b"x" * 300)
    assert sh("mariadb", f"binlog_start_state '{junk}'").returncode != 0


def test_binlog_number():
    assert out("mariadb", "binlog_number binlog.000012") == "12"
    assert sh("mariadb", "binlog_number binlog.x").returncode != 0


# ------------------------------------------------------------ seeding (issue 15)

def test_seed_state_is_the_donors_state_at_the_snapshot():
    st = lambda b, a, p: sh("mariadb", f"mdb_seed_state '{b}' '{a}' '{p}'")  # noqa: E731
    # the primary (server 2) wrote while the dump ran: its entry is the position
    r = st("0-1-500,0-2-1000", "0-1-500,0-2-1100", "0-2-1050")
    assert r.returncode == 0 and r.stdout == "0-1-500,0-2-1050", r
    # a single history
    assert out("mariadb", "mdb_seed_state 0-1-9 0-1-12 0-1-10") == "0-1-10"
    # another server wrote meanwhile (a role change during the copy): unknown
    assert st("0-1-500", "0-1-510,0-2-511", "0-2-511").returncode == 1
    assert st("0-1-500,0-2-1000", "0-1-501,0-2-1100", "0-2-1050").returncode == 1
    # the position is past the state read after the dump: unknown
    assert st("0-1-10", "0-1-20", "0-1-25").returncode == 1
    assert st("0-1-10", "0-1-20", "").returncode == 1
    # below the state read before the dump: commits 6-10 were in the binary log,
    # waiting for a semi-sync acknowledgement, outside the snapshot; the copy
    # starts at the position and receives them by replication (scenario 15)
    assert out("mariadb", "mdb_seed_state 0-1-10 0-1-20 0-1-5") == "0-1-5"
    assert out("mariadb", "mdb_seed_state 0-1-2161,0-2-2988 0-1-2161,0-2-2988 0-2-2986") == "0-1-2161,0-2-2986"


def test_seed_users_lose_only_their_proxy_grants():
    dump = ("CREATE USER IF NOT EXISTS `root`@`localhost` IDENTIFIED BY PASSWORD '*AB';\n"
            "GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION;\n"
            "GRANT PROXY ON ``@`%` TO `root`@`localhost` WITH GRANT OPTION;\n"
            "GRANT SELECT ON `h`.* TO `app`@`%`;")
    r = subprocess.run(["bash", "-c", f'. "{SCRIPTS}/common.sh"; RESULT_DONE=1; mdb_users_loadable'],
                       input=dump, capture_output=True, text=True, timeout=60,
                       env={"PATH": os.environ.get("PATH", ""), "FLAVOR": "mariadb", "PODS": "db-0=127.0.0.1:9",
                            "MYSQL_ROOT_PASSWORD": "x", "TERMINATION_LOG": "/dev/null", "TMPDIR": "/tmp",
            # the GTID functions are the agent's `gtid` (agent/src/gtid_calc.rs)
            "AGENT_BIN": str(AGENT)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [dump.splitlines()[i] for i in (0, 1, 3)]


def test_clone_statement_names_the_donor_and_quotes_the_password():
    q = out("mysql", "clone_sql db-2", MYSQL_ROOT_PASSWORD="p'w\\x")
    assert "SET GLOBAL clone_valid_donor_list='db-2.db.ns.svc:3306';" in q
    assert "SET GLOBAL super_read_only=OFF;" in q
    assert "CLONE INSTANCE FROM 'root'@'db-2.db.ns.svc':3306" in q
    assert q.endswith("IDENTIFIED BY 'p''w\\\\x'")
    # With the operator account, root (local only) is not the clone's login.
    q = out("mysql", "clone_sql db-2", MYSQL_ROOT_PASSWORD="p'w\\x", OPERATOR_PASSWORD="o'p")
    assert "CLONE INSTANCE FROM 'mysqlhook'@'db-2.db.ns.svc':3306" in q
    assert q.endswith("IDENTIFIED BY 'o''p'")
    assert out("mariadb", "sql_ident 'a`b'") == "`a``b`"
