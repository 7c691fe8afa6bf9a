# SPDX-License-Identifier: Apache-2.0
# Real PyTorch end to end (issue #13): elastic-agent on a real etcd running an unmodified DDP
# training script (examples/pytorch/train_elastic.py) with Debian's python3-torch; node kill,
# resume from checkpoint, scale back. Fails (never skips) when torch is not importable.
ea_add_criterion_test(test_e2e_pytorch SOURCES e2e/test_e2e_pytorch.c
                      LIBS ea_e2e_harness ea_etcd_harness TIMEOUT 600 LABELS e2e pytorch)
# The same with warm spares (issue 32): examples/pytorch/train_warm.py under --warm-workers; a
# node killed, the survivors restart on spares parked before the kill and resume.
ea_add_criterion_test(test_e2e_pytorch_warm SOURCES e2e/test_e2e_pytorch_warm.c
                      LIBS ea_e2e_harness ea_etcd_harness TIMEOUT 600 LABELS e2e pytorch)
# Re-formed in place (issue 32 part 2): examples/pytorch/train_inplace.py under --warm-workers
# --in-place; a node added and one killed, the survivors keep their process; exact resumption.
ea_add_criterion_test(test_e2e_pytorch_inplace SOURCES e2e/test_e2e_pytorch_inplace.c
                      LIBS ea_e2e_harness ea_etcd_harness TIMEOUT 600 LABELS e2e pytorch)
# The checkpoint store (issue 39): examples/pytorch/train_checkpoint.py saves a DDP model every
# step into the agent's memory; a rank killed, the group resumes from it with the same loss.
ea_add_criterion_test(test_e2e_pytorch_checkpoint SOURCES e2e/test_e2e_pytorch_checkpoint.c
                      LIBS ea_e2e_harness ea_etcd_harness TIMEOUT 600 LABELS e2e pytorch)
