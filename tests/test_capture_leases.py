"""Lease rules and scheduling as pure functions with an injected clock (no sleeping)."""

from __future__ import annotations

import time

import msgspec
import pytest

from orcad import limits
from orcad.capture import leases, schedule
from orcad.capture.deadlines import JobDeadlines
from orcad.capture.records import (
    JobRecord,
    Provenance,
    PublishOutcome,
    decode_job,
    encode_job,
    new_job,
)
from orcad.capture.schedule import JobView, PoolState, plan, view_of
from orcad.clock import format_time, parse_time
from orcad.errors import LeaseLost

pytestmark = pytest.mark.pure

T0 = 1_800_000_000.0
LEASE = 60.0


def job(job_id: str = "job_" + "a" * 32, created: float = T0) -> JobRecord:
    return new_job(
        job_id=job_id,
        project_id="p" * 64,
        session_id="ses_1",
        turn_id="t1",
        source="user: hello",
        source_digest="d" * 64,
        source_bytes=11,
        source_truncated=False,
        now=created,
    )


def claimed(record: JobRecord, now: float = T0, owner: str = "w1") -> JobRecord:
    return leases.claim(record, now=now, owner=owner, lease_s=LEASE, max_retries=3)


def token_of(record: JobRecord) -> int:
    assert record.lease is not None
    return record.lease.token


def test_claim_issues_strictly_increasing_tokens() -> None:
    first = claimed(job())
    assert first.state == "leased" and token_of(first) == 1
    released = leases.release(first, token=1, now=T0 + 1)
    second = claimed(released, now=T0 + 2)
    assert token_of(second) == 2
    taken = claimed(second, now=T0 + 2 + LEASE, owner="w2")  # expired: taken over
    assert token_of(taken) == 3
    assert taken.fence == 3  # stored in the job file: survives restarts


def test_a_held_lease_is_not_claimable_until_it_expires() -> None:
    held = claimed(job())
    assert not leases.is_claimable(held, T0 + LEASE - 0.001)
    with pytest.raises(leases.NotClaimable):
        claimed(held, now=T0 + 1, owner="w2")
    assert leases.is_claimable(held, T0 + LEASE)


def test_taking_over_an_expired_lease_counts_the_lost_attempt() -> None:
    taken = claimed(claimed(job()), now=T0 + LEASE, owner="w2")
    assert taken.attempts == 1
    assert taken.errors[-1].worker == "w1"
    assert "expired" in taken.errors[-1].message


def test_expiry_of_the_last_allowed_attempt_exhausts_the_job() -> None:
    record = job()
    for attempt in range(3):
        record = leases.fail(
            claimed(record), token=record.fence + 1, now=T0, error="boom", max_retries=3
        )
        assert record.state == "pending" and record.attempts == attempt + 1
    last = claimed(record)
    after = leases.claim(last, now=T0 + LEASE, owner="w2", lease_s=LEASE, max_retries=3)
    assert after.state == "exhausted" and after.attempts == 4 and after.lease is None


@pytest.mark.parametrize("operation", ["renew", "release", "fail", "commit"])
def test_stale_token_or_expired_lease_is_refused(operation: str) -> None:
    first = claimed(job())
    current = claimed(first, now=T0 + LEASE, owner="w2")  # token 2 now

    def apply(record: JobRecord, token: int, now: float) -> JobRecord:
        if operation == "renew":
            return leases.renew(record, token=token, now=now, lease_s=LEASE)
        if operation == "release":
            return leases.release(record, token=token, now=now)
        if operation == "fail":
            return leases.fail(record, token=token, now=now, error="x", max_retries=3)
        return leases.commit(
            record,
            token=token,
            now=now,
            provenance=Provenance(provider="p", model="m", prompt_version="v"),
            outcome=PublishOutcome(added=0, duplicates=0, rejected=0),
        )

    with pytest.raises(LeaseLost):
        apply(current, 1, T0 + LEASE + 1)  # the old holder's token
    expires = parse_time(current.lease.expires_at)  # type: ignore[union-attr]
    with pytest.raises(LeaseLost):
        apply(current, 2, expires)  # right at expiry the lease is gone
    assert apply(current, 2, expires - 0.01).job_id == current.job_id  # just before: fine


def test_renew_extends_from_now() -> None:
    held = claimed(job())
    renewed = leases.renew(held, token=1, now=T0 + 20, lease_s=LEASE)
    assert renewed.lease is not None
    assert parse_time(renewed.lease.expires_at) == pytest.approx(T0 + 20 + LEASE, abs=0.002)
    assert renewed.attempts == 0 and token_of(renewed) == 1


def test_failures_are_retried_max_retries_times_then_exhausted() -> None:
    record = job()
    states = []
    for _ in range(4):
        record = claimed(record)
        record = leases.fail(record, token=record.fence, now=T0, error="bad", max_retries=3)
        states.append((record.state, record.attempts))
    assert states == [("pending", 1), ("pending", 2), ("pending", 3), ("exhausted", 4)]


def test_zero_retries_exhausts_on_the_first_failure() -> None:
    record = leases.fail(claimed(job()), token=1, now=T0, error="bad", max_retries=0)
    assert record.state == "exhausted" and record.attempts == 1


def test_release_uses_no_attempt() -> None:
    record = job()
    for _ in range(10):
        record = leases.release(claimed(record), token=record.fence + 1, now=T0)
    assert record.state == "pending" and record.attempts == 0 and record.fence == 10


def test_retry_after_is_honoured_and_capped() -> None:
    failed = leases.fail(
        claimed(job()), token=1, now=T0, error="429", max_retries=3, retry_after=30
    )
    assert not leases.is_claimable(failed, T0 + 29.9)
    assert leases.is_claimable(failed, T0 + 30)
    parked = leases.fail(
        claimed(job()), token=1, now=T0, error="429", max_retries=3, retry_after=10**9
    )
    assert leases.is_claimable(parked, T0 + limits.RETRY_AFTER_MAX_S)


def test_an_error_message_cut_at_a_redaction_keeps_no_half_marker() -> None:
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    failed = leases.fail(
        claimed(job()), token=1, now=T0, error="x" * 490 + " " + secret, max_retries=3
    )
    assert failed.errors[-1].message == "x" * 490 + " …"  # before: it ended "[REDACTED"


def test_error_messages_are_redacted_and_bounded() -> None:
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    failed = leases.fail(
        claimed(job()), token=1, now=T0, error=f"auth {secret} " + "x" * 5000, max_retries=3
    )
    message = failed.errors[-1].message
    assert secret not in message
    assert len(message) <= leases.ERROR_MESSAGE_MAX_CHARS
    many = job()
    for _ in range(20):
        many = leases.release(claimed(many), token=many.fence + 1, now=T0)
        many = leases.fail(claimed(many), token=many.fence + 1, now=T0, error="e", max_retries=99)
    assert len(many.errors) == leases.JOB_ERRORS_KEPT


def test_a_huge_error_costs_no_more_than_its_start() -> None:
    """jobs.fail takes any error text, and it is cleaned under the project lock: only its
    start is read, so a worker that sends megabytes cannot hold the project for long."""
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    error = f"auth {secret} failed; " + "password = a " * 400_000  # 5.2 MB, slow to redact
    # CPU time: what the work costs, not how long a loaded machine paused it
    started = time.process_time()
    failed = leases.fail(claimed(job()), token=1, now=T0, error=error, max_retries=3)
    assert time.process_time() - started < 2.0  # before: about 10 s
    message = failed.errors[-1].message
    assert message.startswith("auth [REDACTED:")
    assert secret not in message and message.endswith("…")
    assert len(message) <= leases.ERROR_MESSAGE_MAX_CHARS


@pytest.mark.parametrize("word", [100_000, leases.ERROR_INPUT_MAX_CHARS - 12])
def test_the_word_a_long_error_is_cut_in_is_not_kept(word: int) -> None:
    error = "x" * 10 + " " + "k" * word + " " + "y" * 100_000
    # CPU time: what the work costs, not how long a loaded machine paused it
    started = time.process_time()
    failed = leases.fail(claimed(job()), token=1, now=T0, error=error, max_retries=3)
    assert time.process_time() - started < 0.5
    kept = failed.errors[-1].message
    assert kept.startswith("x" * 10 + " ") and "y" not in kept and kept.endswith("…")


def test_only_a_previous_daemons_builtin_leases_are_recovered() -> None:
    mine = claimed(job(), owner=leases.builtin_owner("now", 0))
    theirs = claimed(job(), owner=leases.builtin_owner("before", 1))
    external = claimed(job(), owner="my-external-worker")
    assert not leases.held_by_previous_daemon(mine, "now")
    assert leases.held_by_previous_daemon(theirs, "now")
    assert not leases.held_by_previous_daemon(external, "now")
    recovered = leases.recover(theirs, now=T0)
    assert recovered.state == "pending" and recovered.attempts == 0 and recovered.fence == 1


def test_a_job_whose_daemons_keep_dying_ends_after_recoveries_max() -> None:
    owner = leases.builtin_owner("before", 0)
    record, seen = job(), []
    for _ in range(limits.RECOVERIES_MAX):
        record = leases.recover(claimed(record, owner=owner), now=T0)
        seen.append((record.state, record.attempts, len(record.errors)))
    # each death before the last costs nothing; the last ends the job as one failed attempt
    assert seen == [("pending", 0, 0)] * (limits.RECOVERIES_MAX - 1) + [("exhausted", 1, 1)]
    assert record.lease is None and record.recovery_count() == limits.RECOVERIES_MAX
    assert record.errors[-1].message == (
        f"orcad stopped {limits.RECOVERIES_MAX} times while running this job"
    )
    # a person's retry starts it afresh: its next daemon death is free again
    again = leases.retry(record, now=T0 + 1)
    assert again.recovery_count() == 0 and again.attempts == 0
    assert b'"recoveries"' not in encode_job(again)  # readable by an orcad that predates it
    survived = leases.recover(claimed(again, owner=owner), now=T0 + 2)
    assert (survived.state, survived.attempts, survived.recovery_count()) == ("pending", 0, 1)


def test_an_attempt_that_ends_with_orcad_alive_starts_the_count_again() -> None:
    owner = leases.builtin_owner("before", 0)
    record = job()
    for _ in range(limits.RECOVERIES_MAX - 1):
        record = leases.recover(claimed(record, owner=owner), now=T0)
    failed = leases.fail(claimed(record), token=record.fence + 1, now=T0, error="x", max_retries=3)
    released = leases.release(claimed(record), token=record.fence + 1, now=T0)
    for ended in (failed, released):
        assert ended.recovery_count() == 0
        again = leases.recover(claimed(ended, owner=owner), now=T0)
        assert (again.state, again.recovery_count()) == ("pending", 1)


def test_a_commit_clears_the_recoveries_so_an_older_orcad_reads_the_committed_job() -> None:
    # before: a job an orcad once died running kept "recoveries" in its committed file, which
    # an orcad that predates the field (forbid_unknown_fields) reads as a damaged job file
    recovered = leases.recover(claimed(job(), owner=leases.builtin_owner("before", 0)), now=T0)
    done = leases.commit(
        claimed(recovered, now=T0 + 1),
        token=recovered.fence + 1,
        now=T0 + 2,
        provenance=Provenance(provider="heuristic", model="", prompt_version="v1"),
        outcome=PublishOutcome(added=1, duplicates=0, rejected=0),
    )
    assert done.state == "committed" and done.recovery_count() == 0
    assert b'"recoveries"' not in encode_job(done)


def test_an_expired_lease_taken_over_starts_the_count_again() -> None:
    # the holder's attempt counts as failed with orcad alive, as `fail` does: not in a row
    owner = leases.builtin_owner("before", 0)
    record = job()
    for _ in range(limits.RECOVERIES_MAX - 1):
        record = leases.recover(claimed(record, owner=owner), now=T0)
    assert record.recovery_count() == limits.RECOVERIES_MAX - 1
    taken = claimed(claimed(record, now=T0, owner="w1"), now=T0 + LEASE, owner="w2")
    assert (taken.state, taken.attempts, taken.recovery_count()) == ("leased", 1, 0)
    assert b'"recoveries"' not in encode_job(taken)
    # so is the expiry of its last allowed attempt
    last = leases.claim(
        claimed(record, now=T0, owner="w1"),
        now=T0 + LEASE,
        owner="w2",
        lease_s=LEASE,
        max_retries=0,
    )
    assert (last.state, last.recovery_count()) == ("exhausted", 0)


def test_a_recovered_job_file_round_trips_and_an_old_one_has_no_recoveries() -> None:
    recovered = leases.recover(claimed(job(), owner=leases.builtin_owner("before", 0)), now=T0)
    assert decode_job(encode_job(recovered)).recovery_count() == 1
    assert job().recovery_count() == 0 and b'"recoveries"' not in encode_job(job())


def test_commit_records_provenance_and_clears_the_lease() -> None:
    done = leases.commit(
        claimed(job()),
        token=1,
        now=T0 + 1,
        provenance=Provenance(provider="heuristic", model="", prompt_version="v1"),
        outcome=PublishOutcome(added=2, duplicates=1, rejected=0),
    )
    assert done.state == "committed" and done.lease is None and done.committed_at is not None
    assert done.provenance is not None and done.provenance.provider == "heuristic"


# --- scheduling -------------------------------------------------------------------------------


def view(job_id: str, created: float, **changes: object) -> JobView:
    base = view_of(job(job_id, created))
    return JobView(**{**{f: getattr(base, f) for f in base.__struct_fields__}, **changes})  # type: ignore[arg-type]


def test_plan_claims_oldest_first_and_skips_what_is_not_claimable() -> None:
    jobs = (
        view("job_" + "3" * 32, T0 + 3),
        view("job_" + "1" * 32, T0 + 1),
        view("job_" + "2" * 32, T0 + 2, state="leased", lease_expires=T0 + 100),
        view("job_" + "4" * 32, T0 + 4, state="committed"),
        view("job_" + "5" * 32, T0 + 5, not_before=T0 + 50),
        view("job_" + "6" * 32, T0 + 6, project_id="q" * 64),
        view("job_" + "7" * 32, T0 + 7),
    )
    result = plan(
        T0 + 10,
        PoolState(
            jobs=jobs,
            running=frozenset({"job_" + "7" * 32}),
            skipped_projects=frozenset({"q" * 64}),
        ),
    )
    assert [v.job_id[4] for v in result.claim] == ["1", "3"]
    assert result.wake_at == T0 + 50  # the retry-after job becomes claimable first


def test_a_job_an_orcad_died_running_runs_alone() -> None:
    recovered = view_of(leases.recover(claimed(job(), owner=leases.builtin_owner("x", 0)), now=T0))
    fresh = view_of(job())
    assert (recovered.recoveries, fresh.recoveries) == (1, 0)
    assert schedule.runs_alone(recovered) and not schedule.runs_alone(fresh)
    # (the job next in order, whether each lease the built-in workers hold runs alone)
    assert schedule.may_start(fresh, []) and schedule.may_start(recovered, [])
    assert schedule.may_start(fresh, [False, False])
    assert not schedule.may_start(recovered, [False])  # waits for the running ones to end
    assert not schedule.may_start(fresh, [True])  # nothing beside one that runs alone
    assert not schedule.may_start(recovered, [True])
    held = schedule.BuiltinLeases()
    held.hold("a", alone=False)
    held.hold("b", alone=False)
    assert "a" in held and held.ids() == {"a", "b"} and held.may_start(fresh)
    assert not held.let_go("b")  # nobody waited: no one to wake
    assert not held.may_start(recovered)
    assert held.let_go("a")  # the one told to wait is woken
    assert not held.let_go("a")  # letting go twice is harmless
    assert held.may_start(recovered) and held.ids() == frozenset()


def test_plan_wakes_at_lease_expiry_and_claims_after_it() -> None:
    jobs = (view("job_" + "2" * 32, T0, state="leased", lease_expires=T0 + 60),)
    assert plan(T0, PoolState(jobs=jobs)) == schedule.Plan(claim=(), wake_at=T0 + 60)
    assert [v.job_id for v in plan(T0 + 60, PoolState(jobs=jobs)).claim] == [jobs[0].job_id]


def test_a_wait_further_ahead_than_orcad_sets_counts_as_passed() -> None:
    held = claimed(job())
    edge = T0 + limits.JOB_WAIT_MAX_S
    at_edge = msgspec.structs.replace(
        held, lease=msgspec.structs.replace(held.lease, expires_at=format_time(edge))
    )
    beyond = msgspec.structs.replace(
        held, lease=msgspec.structs.replace(held.lease, expires_at=format_time(edge + 1))
    )
    assert not leases.is_claimable(at_edge, T0)  # a one-year lease_s grants this much
    assert leases.is_claimable(beyond, T0)
    waiting = msgspec.structs.replace(job(), not_before=format_time(edge + 1))
    assert leases.is_claimable(waiting, T0)
    views = (view_of(at_edge), view_of(beyond), view_of(waiting))
    planned = plan(T0, PoolState(jobs=views))
    assert planned.claim == (views[1], views[2]) and planned.wake_at == edge


def test_a_publish_kept_from_the_lock_is_tried_again_only_while_the_lease_runs() -> None:
    held = view_of(claimed(job()))
    assert schedule.lease_runs(held, T0 + LEASE - 0.001)
    assert not schedule.lease_runs(held, T0 + LEASE)
    assert not schedule.lease_runs(view_of(job()), T0)  # released or never claimed
    assert not schedule.lease_runs(None, T0)  # gone


def test_plan_waits_out_a_reschedule() -> None:
    jobs = (view("job_" + "1" * 32, T0),)
    retry = schedule.reschedule_at(T0, 30.0)
    assert retry == T0 + 30.0
    assert plan(T0 + 29, PoolState(jobs=jobs, retry_at=retry)) == schedule.Plan(
        claim=(), wake_at=retry
    )
    assert len(plan(T0 + 30, PoolState(jobs=jobs, retry_at=retry)).claim) == 1


def test_plan_with_nothing_to_do_sleeps_until_a_change() -> None:
    assert plan(T0, PoolState(jobs=())) == schedule.Plan(claim=(), wake_at=None)


def test_renewal_interval_is_a_third_of_the_lease() -> None:
    assert schedule.renew_interval(60.0) == 20.0


@pytest.mark.parametrize(
    ("end", "action"),
    [
        ("output", "publish"),
        ("provider_error", "fail"),
        ("timed_out", "fail"),
        ("crashed", "fail"),
        ("cancelled", "release"),
        ("lease_lost", "drop"),
    ],
)
def test_after_attempt(end: schedule.AttemptEnd, action: str) -> None:
    assert schedule.after_attempt(end) == action


def test_only_committed_jobs_beyond_the_newest_128_are_pruned() -> None:
    committed = [
        view(f"job_{i:032x}", T0 + i, state="committed", committed_at=T0 + 1000 + i)
        for i in range(130)
    ]
    others = [
        view(f"job_{1000 + i:032x}", T0, state=s) for i, s in enumerate(("exhausted", "pending"))
    ]
    pruned = schedule.committed_jobs_to_prune([*others, *committed])
    assert pruned == [committed[0].job_id, committed[1].job_id]
    assert schedule.committed_jobs_to_prune(committed[:128]) == []


# --- waits timed on the monotonic clock too (JobDeadlines) --------------------------------------


def test_a_lease_noted_here_ends_on_time_when_the_wall_clock_goes_back() -> None:
    deadlines = JobDeadlines()
    held = claimed(job(), now=T0)
    deadlines.note(held, T0, 100.0)
    back = T0 - 86400.0  # the wall clock set back a day
    # LEASE - 1 s later by the monotonic clock: still held, by the token that holds it
    honoured = deadlines.honoured(held, back + LEASE - 1, 100.0 + LEASE - 1)
    assert not leases.is_claimable(honoured, back + LEASE - 1)
    leases.check_holder(honoured, token_of(held), back + LEASE - 1)
    # its end: over, on the wall clock as it reads now
    honoured = deadlines.honoured(held, back + LEASE, 100.0 + LEASE)
    assert leases.is_claimable(honoured, back + LEASE)
    with pytest.raises(LeaseLost):
        leases.check_holder(honoured, token_of(held), back + LEASE)
    view = deadlines.honoured_view(view_of(held), back + LEASE, 100.0 + LEASE)
    assert plan(back + LEASE, PoolState(jobs=(view,))).claim == (view,)
    # set forward a day instead, the clock does not end it early either
    ahead = T0 + 86400.0 + 1
    forward = deadlines.honoured(held, ahead, 101.0)
    assert not leases.is_claimable(forward, ahead)
    leases.check_holder(forward, token_of(held), ahead)
    view = deadlines.honoured_view(view_of(held), ahead, 101.0)
    assert plan(ahead, PoolState(jobs=(view,))) == schedule.Plan(
        claim=(), wake_at=ahead + LEASE - 1
    )
    assert leases.is_claimable(deadlines.honoured(held, ahead, 100.0 + LEASE), ahead)


def test_noted_waits_are_kept_while_their_job_holds_them_and_no_longer() -> None:
    deadlines = JobDeadlines()
    held = claimed(job(), now=T0)
    deadlines.note(held, T0, 0.0)
    deadlines.prune({held.job_id: view_of(held)}.get)  # its job holds it still
    assert len(deadlines) == 1
    back = T0 - 86400.0 + LEASE
    assert leases.is_claimable(deadlines.honoured(held, back, LEASE), back)
    # over on both clocks, then the wall clock set back: still over, so still kept
    deadlines.prune({held.job_id: view_of(held)}.get)
    back = T0 - 86400.0 + 2 * LEASE
    assert leases.is_claimable(deadlines.honoured(held, back, 86400.0 + 2 * LEASE), back)
    assert deadlines.honoured_view(view_of(held), back, 86400.0 + 2 * LEASE).lease_expires == back
    # a job gone, or written again without that wait, has it forgotten
    deadlines.prune({}.get)
    assert len(deadlines) == 0
    deadlines.note(held, T0, 0.0)
    renewed = leases.renew(held, token=token_of(held), now=T0 + 1, lease_s=LEASE)
    deadlines.prune({held.job_id: view_of(renewed)}.get)  # renewed by another daemon
    assert len(deadlines) == 0
    # a job written again without a lease forgets its lease's end at once
    deadlines.note(held, T0, 0.0)
    deadlines.note(leases.release(held, token=token_of(held), now=T0 + 1), T0 + 1, 1.0)
    assert len(deadlines) == 0


def test_a_wait_not_noted_here_or_changed_since_is_honoured_as_stored() -> None:
    deadlines = JobDeadlines()
    held = claimed(job(), now=T0)
    assert deadlines.honoured(held, T0 - 86400.0, 1e6) is held
    deadlines.note(held, T0, 0.0)
    assert held.lease is not None
    renewed_elsewhere = msgspec.structs.replace(
        held, lease=msgspec.structs.replace(held.lease, expires_at=format_time(T0 + 2 * LEASE))
    )
    assert deadlines.honoured(renewed_elsewhere, T0 - 86400.0, 1e6) is renewed_elsewhere
