# Straggler timing under DDP (issue 40, measured by bench/straggler_ddp.sh): DDP runs the
# all-reduce inside backward(), so the helper's DDP block ends at the comm hook, not when
# backward() returns (python/tests/test_heartbeat.py: a stand-in DDP and a fake clock).
# the block timed to its end again: every rank timed at the slowest one's pace
mutant --target test_straggler python/elastic_agent/heartbeat.py \
  's/        end = self.ready if self.ready is not None else perf_counter()/        end = perf_counter()/' \
  '^test_python_elastic_agent$'
