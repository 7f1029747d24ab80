"""How many CPUs the service counts on: the machine's, fewer in a container with a CPU
quota (so `WORKERS` defaults to what the container may really use), shared out among
the worker processes so their decoder pools do not oversubscribe them."""

from __future__ import annotations

import os

from lib import worker_processes
from lib.worker_processes import available_cpus, cpu_share, share_cpus


def test_a_containers_cpu_quota_caps_the_cpus_counted(tmp_path):
    machine = available_cpus(tmp_path)  # no quota readable: the machine's (and affinity's)
    assert 1 <= machine <= (os.cpu_count() or 2)
    (tmp_path / "cpu.max").write_text("50000 100000\n")  # half a CPU
    assert available_cpus(tmp_path) == 1
    (tmp_path / "cpu.max").write_text("max 100000\n")  # no quota
    assert available_cpus(tmp_path) == machine
    (tmp_path / "cpu.max").unlink()
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("100000\n")  # cgroup v1: one CPU
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert available_cpus(tmp_path) == 1


def test_each_worker_process_counts_on_its_share_of_the_cpus(monkeypatch):
    monkeypatch.setattr(worker_processes, "available_cpus", lambda: 8)
    monkeypatch.setattr(worker_processes, "_processes_sharing", 1)
    assert cpu_share() == 8
    share_cpus(3)
    assert cpu_share() == 2
    share_cpus(16)
    assert cpu_share() == 1  # never none
