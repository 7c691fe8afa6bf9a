# KV backends: the conformance suite (tests/kv_conformance), built once per backend from the same
# sources plus that backend's fixture file, and the file backend's own multi-process tests.
# Another backend adds its binary the same way, e.g. from its own fragment:
#   ea_add_criterion_test(test_kv_conformance_etcd
#     SOURCES ${EA_KV_CONFORMANCE_SOURCES} kv_conformance/fixture_etcd.c
#     LIBS ${EA_KV_CONFORMANCE_LIBS})
set(EA_KV_CONFORMANCE_SOURCES
    kv_conformance/conformance.c kv_conformance/conformance_watch.c kv_conformance/kvtest.c)
set(EA_KV_CONFORMANCE_LIBS ea_backends Threads::Threads)

ea_add_criterion_test(test_kv_conformance_memory
  SOURCES ${EA_KV_CONFORMANCE_SOURCES} kv_conformance/fixture_memory.c
  LIBS ${EA_KV_CONFORMANCE_LIBS} TIMEOUT 60)
ea_add_criterion_test(test_kv_conformance_file
  SOURCES ${EA_KV_CONFORMANCE_SOURCES} kv_conformance/fixture_file.c
  LIBS ${EA_KV_CONFORMANCE_LIBS} TIMEOUT 60)
ea_add_criterion_test(test_kv_file_backend
  SOURCES kv_conformance/file_specific.c kv_conformance/kvtest.c
  LIBS ea_backends PkgConfig::JANSSON TIMEOUT 60)
