"""The in-band check elements of reductions (runtime/inband.py) and the survey's judgement (runtime/survey.py)."""
from __future__ import annotations

import numpy as np
import pytest

from meshax._src.runtime import inband, survey

COMBINE = {"sum": np.add.reduce, "max": np.maximum.reduce, "min": np.minimum.reduce}
DTYPES = [np.float32, np.float64, np.int32, np.int64, np.complex64, np.complex128]
BUFFER_BYTES = 64


def reduced_buffer(chains, dtype, op):
    """What a reduction over members with these history hashes leaves in their buffers (zeros and a check), and
    what each member's check predicted."""
    members = len(chains)
    check = inband.trailer(np.dtype(dtype), op, members, BUFFER_BYTES)
    buffers, expected = [], []
    for chain in chains:
        buffer = np.zeros(BUFFER_BYTES // np.dtype(dtype).itemsize, dtype)
        expected.append(check.write(buffer, chain))
        buffers.append(buffer)
    return check, COMBINE[op](np.stack(buffers), axis=0).astype(dtype), expected  # NumPy widens int32 sums


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("members", [2, 3, 1000])
def test_equal_histories_agree_and_different_histories_are_caught(dtype, op, members):
    if op != "sum" and np.dtype(dtype).kind == "c":
        assert inband.trailer(np.dtype(dtype), op, members, BUFFER_BYTES) is None
        return
    rng = np.random.default_rng(members)
    for _ in range(30):
        chain = int(rng.integers(0, 2**32))
        same = [chain] * members
        check, total, expected = reduced_buffer(same, dtype, op)
        assert check.agrees(total, expected[0])
        for differing in (1, members // 2, members - 1):  # some members ran something else (all the same thing)
            other = list(same)
            changed = int(rng.integers(0, 2**32))
            for index in rng.choice(members, differing, replace=False):
                other[index] = changed
            check, total, expected = reduced_buffer(other, dtype, op)
            assert not any(check.agrees(total, e) for e in expected)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.complex64, np.float64, np.int64, np.complex128])
def test_every_bit_of_the_hash_is_checked(dtype):
    """Two histories whose hashes differ in a single bit are told apart, whichever bit it is."""
    for bit in range(32):
        check, total, expected = reduced_buffer([0x5A5A5A5A, 0x5A5A5A5A ^ (1 << bit), 0x5A5A5A5A], dtype, "sum")
        assert not any(check.agrees(total, e) for e in expected), bit


def test_a_member_reducing_another_dtype_is_caught():
    """Every member sends a buffer of the same byte size with the check at its end; MPI reads them all as the
    caller's dtype."""
    chain, members = 123456789, 4
    buffers, expected = [], None
    for dtype in (np.float32, np.float32, np.int32, np.float32):
        buffer = np.zeros(BUFFER_BYTES // np.dtype(dtype).itemsize, dtype)
        predicted = inband.trailer(np.dtype(dtype), "sum", members, BUFFER_BYTES).write(buffer, chain)
        expected = expected or predicted
        buffers.append(buffer.view(np.float32))
    total = np.add.reduce(np.stack(buffers))
    assert not inband.trailer(np.dtype(np.float32), "sum", members, BUFFER_BYTES).agrees(total, expected)


def test_unsupported_reductions_use_the_separate_check():
    assert inband.trailer(np.dtype(np.float32), "prod", 4, BUFFER_BYTES) is None
    assert inband.trailer(np.dtype(np.uint8), "sum", 4, BUFFER_BYTES) is None
    assert inband.trailer(np.dtype(np.float16), "max", 4, BUFFER_BYTES) is None
    assert inband.trailer(np.dtype(np.float32), "sum", 1 << 17, BUFFER_BYTES) is None  # digits would be too small


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


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_zero_digits_and_extreme_hashes_agree(dtype, op):
    """The check compares bytes: digits of zero reduce to +0.0 (never -0.0), so equal histories agree for the
    smallest and largest hashes too, and pad bytes of complex trailers reduce to zeros."""
    if op != "sum" and np.dtype(dtype).kind == "c":
        return
    for members in (2, 3):
        for chain in (0, 1, 1 << 22, 2**32 - 1):
            check, total, expected = reduced_buffer([chain] * members, dtype, op)
            assert check.agrees(total, expected[0]), (members, chain)
            assert check.agrees(bytearray(total.tobytes()), expected[0]), (members, chain)
