"""Backup schedules: every schedule the hook accepts, the API server accepts too.

The hook checks `spec.backup.schedule` and `binlogSchedule` itself (hooks/src/cron.rs)
because a CronJob the API server refuses is refused on every sync, with nothing in
the status: no backup ever runs while `SpecAccepted` says True (issue 34.7, day of
week `7`). This section holds that check to the real validator: the CronJob the hook
emits in the golden fixture `sync/backup-cronjob-pvc`, with only its schedule
changed, is dry-run created for

- a fixed list of schedules, each with the verdict both sides must give, and
- a few hundred schedules generated from a fixed seed out of valid and invalid
  pieces (numbers in and out of range, names, `*`, `?`, ranges, steps, lists,
  descriptors, time zones), judged by the property "the hook accepts => the API
  server accepts". Schedules the hook refuses but the server takes are only
  counted: refusing loudly is safe, accepting what the server refuses is the bug.

The hook's verdicts come from `mysql-hook check-schedules` (the binary
MYSQL_HOOK_BIN names, as for grow-claims).
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
from typing import Any

from grow_claims import binary
from harness import REPO, ApiError, Cluster

NS = "schedule-test"
FIXTURE = REPO / "test-fixtures" / "sync" / "backup-cronjob-pvc" / "response.json"
SEED = 3407
GENERATED = 600

# (schedule, hook and API server accept it). Both sides must agree on each.
KNOWN: list[tuple[str, bool]] = [
    ("0 3 * * *", True),
    ("*/15 * * * *", True),
    ("0 0 1,15 * mon-fri", True),
    ("30 2 * jan-mar 0", True),
    ("0 0 ? * 6", True),
    ("0 0 * * sun", True),
    ("@daily", True),
    ("@weekly", True),
    ("0 3 * * 7", False),  # issue 34.7: robfig/cron's day of week ends at 6
    ("0 3 * * 0-7", False),
    ("61 * * * *", False),
    ("* 24 * * *", False),
    ("* * 0 * *", False),
    ("* * * 13 *", False),
    ("5-1 * * * *", False),
    ("0 3 * *", False),
    ("@sometimes", False),
    ("@Daily", False),  # found by the generated cases: descriptors are case-sensitive
]


# (min, max, names) of minute, hour, day of month, month, day of week.
BOUNDS = [(0, 59, []), (0, 23, []), (1, 31, []), (1, 12, ["jan", "Feb", "dec", "JUN"]),
          (0, 6, ["sun", "Mon", "sat", "FRI"])]
EDGES = [-1, 0, 1, 6, 7, 8, 12, 13, 23, 24, 31, 32, 59, 60, 61]


def _piece(rng: random.Random, field: int) -> str:
    """One item of one field: mostly valid for the field, often at or past an edge."""
    lo, hi, names = BOUNDS[field]

    def n() -> str:
        if rng.random() < 0.9:
            return str(rng.randint(lo, hi))
        return str(rng.choice(EDGES))

    def name_or_n() -> str:
        return rng.choice(names) if names and rng.random() < 0.4 else n()

    choice = rng.randrange(16)
    if choice == 0:
        return rng.choice(["*", "?"])
    if choice == 1:
        return f"{rng.choice(['*', n()])}/{rng.choice(['0', '1', '2', str(hi), str(hi + 1), '15', 'x'])}"
    if choice == 2:
        return f"{name_or_n()}-{name_or_n()}"
    if choice == 3:
        return f"{n()}-{n()}/{rng.choice(['1', '2', '3'])}"
    if choice == 4:
        return rng.choice(["", "L", "1#2", "W", "foo", "1-", "-"])
    return name_or_n()


def _field(rng: random.Random, field: int) -> str:
    return ",".join(_piece(rng, field) for _ in range(1 if rng.random() < 0.8 else 2))


def generated() -> list[str]:
    rng = random.Random(SEED)
    out = []
    for _ in range(GENERATED):
        r = rng.random()
        if r < 0.05:
            out.append(rng.choice(["@yearly", "@annually", "@monthly", "@midnight", "@hourly",
                                   "@every 1h", "@reboot", "@Daily"]))
        elif r < 0.08:
            out.append("CRON_TZ=UTC 0 3 * * *")
        else:
            fields = [_field(rng, i) for i in range(5)]
            if rng.random() < 0.05:
                fields = fields[:4] if rng.random() < 0.5 else fields + ["*"]
            out.append(" ".join(fields))
    return out


def _template() -> dict:
    answer = json.loads(FIXTURE.read_text(encoding="utf-8"))
    jobs = [c for c in answer["children"] if c["kind"] == "CronJob"]
    if not jobs:
        raise RuntimeError(f"{FIXTURE} holds no CronJob")
    job = copy.deepcopy(jobs[0])
    job["metadata"]["namespace"] = NS
    return job


def _hook_verdicts(schedules: list[str]) -> list[str]:
    exe = binary()
    if exe is None or not exe.exists():
        raise RuntimeError("no mysql-hook binary: run through `cargo test --test k8s_conformance` "
                           "(MYSQL_HOOK_BIN) or build it first")
    if any("\n" in s for s in schedules):
        raise RuntimeError("a schedule holds a newline")
    out = subprocess.run([str(exe), "check-schedules"], input="".join(s + "\n" for s in schedules),
                         capture_output=True, text=True, timeout=60, check=False)
    if out.returncode not in (0, 2):
        raise RuntimeError(f"check-schedules exited {out.returncode}: {out.stderr}")
    verdicts = out.stdout.splitlines()
    if len(verdicts) != len(schedules):
        raise RuntimeError(f"check-schedules answered {len(verdicts)} lines for {len(schedules)} schedules")
    return verdicts


def _server_accepts(k8s: Cluster, template: dict, schedule: str) -> tuple[bool, str]:
    job = copy.deepcopy(template)
    job["spec"]["schedule"] = schedule
    try:
        k8s.create(job, namespace=NS, dry_run=True)
        return True, ""
    except ApiError as e:
        if e.code != 422:
            raise
        return False, e.message


def check_schedules(k8s: Cluster, rep: Any) -> None:
    what = "schedules"
    try:
        k8s.ensure_namespace(NS)
        template = _template()
        known = [s for s, _ in KNOWN]
        gen = generated()
        verdicts = _hook_verdicts(known + gen)
    except (RuntimeError, OSError, ApiError) as e:
        rep.fail(what, str(e))
        return
    for (schedule, want), verdict in zip(KNOWN, verdicts):
        hook_ok = verdict == "ok"
        server_ok, message = _server_accepts(k8s, template, schedule)
        name = f"{what}: {schedule!r}"
        if hook_ok != want or server_ok != want:
            rep.fail(name, f"expected {'accepted' if want else 'refused'} by both; the hook said "
                           f"{verdict!r}, the API server {'accepted it' if server_ok else 'refused: ' + message}")
        else:
            rep.ok(f"{name} {'accepted' if want else 'refused'} by the hook and the API server")
    stricter = 0
    bad = []
    both_ok = 0
    for schedule, verdict in zip(gen, verdicts[len(KNOWN):]):
        server_ok, message = _server_accepts(k8s, template, schedule)
        if verdict == "ok" and not server_ok:
            bad.append(f"{schedule!r}: the hook accepts it, the API server refuses: {message}")
        elif verdict == "ok":
            both_ok += 1
        elif server_ok:
            stricter += 1
    name = f"{what}: {len(gen)} generated (seed {SEED})"
    if bad:
        rep.fail(name, "; ".join(bad))
    else:
        rep.ok(f"{name}: none the hook accepts is refused by the API server "
               f"({both_ok} accepted by both, {stricter} refused by the hook only, "
               f"{len(gen) - both_ok - stricter} refused by both)")
