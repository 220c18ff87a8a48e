"""The in-band check elements of reductions (runtime/inband.py) and the survey's judgement (runtime/survey.py)."""
from __future__ import annotations

import numpy as np
import pytest

from meshax._src.runtime import inband, survey

COMBINE = {"sum": np.add.reduce, "max": np.maximum.reduce, "min": np.minimum.reduce}
DTYPES = [np.float32, np.float64, np.int32, np.int64, np.complex64, np.complex128]


def reduced_tail(chains, dtype, op):
    """What a reduction over members with these history hashes leaves in the trailer."""
    members = len(chains)
    length = inband.trailer_length(np.dtype(dtype), op, members)
    tails, expected = [], []
    for chain in chains:
        tail = np.empty(length, dtype)
        expected.append(inband.write_trailer(tail, chain, op, members))
        tails.append(tail)
    return COMBINE[op](np.stack(tails), axis=0).astype(dtype), expected  # NumPy widens int32 sums; MPI does not


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("members", [2, 3, 1000])
def test_equal_histories_agree_and_one_different_history_is_caught(dtype, op, members):
    if op != "sum" and np.dtype(dtype).kind == "c":
        assert inband.trailer_length(np.dtype(dtype), op, members) == 0
        return
    rng = np.random.default_rng(members)
    for _ in range(30):
        chain = int(rng.integers(0, 2**32))
        same = [chain] * members
        tail, expected = reduced_tail(same, dtype, op)
        assert inband.trailer_agrees(tail, expected[0])
        other = list(same)
        other[int(rng.integers(0, members))] = int(rng.integers(0, 2**32))
        if other != same:
            tail, expected = reduced_tail(other, dtype, op)
            assert not any(inband.trailer_agrees(tail, e) for e in expected)


def test_a_member_reducing_another_dtype_is_caught():
    """Every member sends a buffer of the same byte size with the check at its end; MPI reads them all as the
    caller's dtype."""
    chain, members = 123456789, 4
    buffers, expected = [], None
    for dtype in (np.float32, np.float32, np.int32, np.float32):
        work = np.zeros(64 // np.dtype(dtype).itemsize, dtype)
        length = inband.trailer_length(np.dtype(dtype), "sum", members)
        predicted = inband.write_trailer(work[work.size - length:], chain, "sum", members)
        expected = expected or predicted
        buffers.append(work.view(np.float32))
    total = np.add.reduce(np.stack(buffers))
    length = inband.trailer_length(np.dtype(np.float32), "sum", members)
    assert not inband.trailer_agrees(total[total.size - length:], expected)


def test_unsupported_reductions_use_the_separate_check():
    assert inband.trailer_length(np.dtype(np.float32), "prod", 4) == 0
    assert inband.trailer_length(np.dtype(np.uint8), "sum", 4) == 0
    assert inband.trailer_length(np.dtype(np.float16), "max", 4) == 0


def waiting(group, sequence, chain, what="MPI Allreduce"):
    return {"text": f"in {what}", "sequences": {group: sequence}, "waiting": 3.0, "what": what, "site": "x.py:1",
            "group": group, "sequence": sequence, "chain": chain}


BUSY = {"text": "not in a communication; running x.py:9 in step", "sequences": {}}


def test_a_stall_is_judged_only_when_everyone_waits_twice_the_same_way():
    judge = survey.Judge()
    split = {0: waiting("0,1", 3, 11), 1: waiting("0,1", 3, 22)}
    assert judge.verdict(split, {0, 1}, set())[0] == "wait"  # first sighting
    verdict, message = judge.verdict(split, {0, 1}, set())
    assert verdict == "fail" and "processes [0, 1] ran different operations" in message


def test_one_long_operation_everyone_waits_in_is_not_a_failure():
    judge = survey.Judge()
    same = {0: waiting("0,1", 3, 11), 1: waiting("0,1", 3, 11)}
    assert [judge.verdict(same, {0, 1}, set())[0] for _ in range(3)] == ["wait"] * 3


def test_a_process_still_computing_is_named_not_blamed():
    judge = survey.Judge()
    states = {0: waiting("0,1", 3, 11), 1: BUSY}
    for _ in range(3):
        verdict, busy = judge.verdict(states, {0, 1}, set())
        assert verdict == "wait" and busy == "process 1 (running x.py:9 in step)"


def test_a_process_that_left_while_another_waits_for_it_fails_the_job():
    verdict, message = survey.Judge().verdict({0: waiting("0,1", 3, 11)}, {0}, {1})
    assert verdict == "fail" and message.startswith("process 1 left the job")


def test_a_long_transfer_among_some_processes_while_the_others_wait_for_them_is_not_a_failure():
    judge = survey.Judge()
    states = {0: waiting("0,1", 5, 11, "reshard"), 1: waiting("0,1", 5, 11, "reshard"),
              2: waiting("0,1,2,3", 9, 33, "barrier"), 3: waiting("0,1,2,3", 9, 33, "barrier")}
    assert [judge.verdict(states, {0, 1, 2, 3}, set())[0] for _ in range(3)] == ["wait"] * 3
