"""Every lab's checks against mutants of its own solution (issue 61; tests/support/mutants.py): one test per lab,
marked ``mutants`` and run by ``make test-mutants`` only (not by make test, test-labs or CI: tests/README.md).

A lab's test fails on a survivor that ``tests/mutants_allowed.toml`` does not list as equivalent (the checks miss
a mistake: a gap for the lab's check author), and, before that and said apart, on what makes the run itself
untrustworthy: the unmutated solution failing a check, a check that crashed, a kill message not in the labs'
plain format, state a mutant left broken (the canary), an allow-list entry no mutant has. The report of each lab
is printed and written to ``build/mutants/<lab>.md``.
"""

from __future__ import annotations

import pytest

from lab_testing import LABS
from mutants import load_allowed, run_lab

pytestmark = pytest.mark.mutants


@pytest.mark.parametrize("lab", LABS)
def test_every_mutant_of_the_solution_is_refused_by_a_check(spark, lab):
    run = run_lab(lab, spark, allowed=load_allowed().get(lab, []))
    path = run.write()
    problems = run.infrastructure_problems()
    if problems:
        pytest.fail(f"{lab}: INFRASTRUCTURE BROKEN, the mutants' verdicts cannot be trusted ({path}):\n"
                    + "\n".join(f"  {p}" for p in problems), pytrace=False)
    if run.not_allowed:
        killed, judged = run.score()
        pytest.fail(f"{lab}: {len(run.not_allowed)} SURVIVOR(S) not on the allow-list (score {killed}/{judged}; "
                    f"{path}):\n" + "\n".join(f"  {o.mutant.exercise} L{o.mutant.line} {o.mutant.operator}: "
                                             f"{o.mutant.original}  →  {o.mutant.mutated}" for o in run.not_allowed),
                    pytrace=False)


def test_a_mutant_past_its_limit_is_stopped_and_the_session_still_answers(spark, monkeypatch):
    """The timeout, on the real session: a Spark job past the limit is cancelled (its call returns with an error,
    counted as a timeout), a JVM call with no job to cancel gets its py4j connection closed after the grace, a
    Python loop is stopped at once; each time the next Spark call gets its own answer."""
    import time

    import mutants
    from mutants import _Alarm

    monkeypatch.setattr(mutants, "GRACE", 2.0)
    for block in (lambda: spark.range(0, 10**12).selectExpr("sum(id % 7)").collect(),
                  lambda: spark.sparkContext._jvm.java.lang.Thread.sleep(60_000),
                  lambda: [None for _ in iter(int, 1)]):
        began, alarm = time.monotonic(), _Alarm(1, spark)
        with pytest.raises(BaseException) as stopped:   # MutantTimeout, or the cancelled job's error
            with alarm:
                block()
        assert alarm.fired and time.monotonic() - began < 30, (stopped.value, time.monotonic() - began)
        spark.sparkContext.cancelAllJobs()
        assert spark.range(7).count() == 7 and spark.sql("SELECT 2 + 2 AS four").first().four == 4
