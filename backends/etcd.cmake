# SPDX-License-Identifier: Apache-2.0
# The etcd v3 backend (DESIGN.md §2): gRPC core C API + protobuf-c messages generated at build
# time from the trimmed protos in proto/. Included from backends/CMakeLists.txt; adds itself to
# ea_backends and switches on its entry in the registry (kv.c) with EA_HAVE_ETCD.
pkg_check_modules(GRPC REQUIRED IMPORTED_TARGET grpc)
pkg_check_modules(PROTOBUF_C REQUIRED IMPORTED_TARGET libprotobuf-c)
find_program(EA_PROTOC_C protoc-c REQUIRED)

set(EA_ETCD_PROTO_DIR ${CMAKE_CURRENT_SOURCE_DIR}/proto)
set(EA_ETCD_GEN_DIR ${CMAKE_CURRENT_BINARY_DIR}/etcd_proto)
set(EA_ETCD_GEN_SRC ${EA_ETCD_GEN_DIR}/kv.pb-c.c ${EA_ETCD_GEN_DIR}/rpc.pb-c.c)
set(EA_ETCD_GEN_HDR ${EA_ETCD_GEN_DIR}/kv.pb-c.h ${EA_ETCD_GEN_DIR}/rpc.pb-c.h)

add_custom_command(
  OUTPUT ${EA_ETCD_GEN_SRC} ${EA_ETCD_GEN_HDR}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${EA_ETCD_GEN_DIR}
  COMMAND ${EA_PROTOC_C} --c_out=${EA_ETCD_GEN_DIR} -I${EA_ETCD_PROTO_DIR}
          ${EA_ETCD_PROTO_DIR}/kv.proto ${EA_ETCD_PROTO_DIR}/rpc.proto
  DEPENDS ${EA_ETCD_PROTO_DIR}/kv.proto ${EA_ETCD_PROTO_DIR}/rpc.proto
  COMMENT "protoc-c: etcd v3 messages"
  VERBATIM)

# Generated code is not ours to keep warning-free.
set_source_files_properties(${EA_ETCD_GEN_SRC} PROPERTIES
  GENERATED TRUE
  COMPILE_OPTIONS "-Wno-error;-Wno-missing-prototypes;-Wno-shadow;-Wno-unused-parameter")

target_sources(ea_backends PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/etcd.c
  ${CMAKE_CURRENT_SOURCE_DIR}/etcd_grpc.c
  ${CMAKE_CURRENT_SOURCE_DIR}/etcd_stream.c
  ${CMAKE_CURRENT_SOURCE_DIR}/etcd_watch.c
  ${EA_ETCD_GEN_SRC} ${EA_ETCD_GEN_HDR})
target_include_directories(ea_backends PRIVATE ${EA_ETCD_GEN_DIR})
target_link_libraries(ea_backends PRIVATE PkgConfig::GRPC PkgConfig::PROTOBUF_C Threads::Threads)
target_compile_definitions(ea_backends PRIVATE EA_HAVE_ETCD)
