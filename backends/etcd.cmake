# SPDX-License-Identifier: Apache-2.0
# The etcd v3 backend (DESIGN.md §2): gRPC core C API + protobuf-c messages generated at build
# time from the trimmed protos in proto/. Included from backends/CMakeLists.txt. Built twice over:
# the static library ea_kv_etcd (tests link it) and the module ea-kv-etcd.so that the agent loads
# only when --rdzv-backend etcd is chosen (kv.c), so no other run pays for loading gRPC.
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

add_library(ea_kv_etcd STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/etcd.c
  ${CMAKE_CURRENT_SOURCE_DIR}/etcd_grpc.c
  ${CMAKE_CURRENT_SOURCE_DIR}/etcd_stream.c
  ${CMAKE_CURRENT_SOURCE_DIR}/etcd_watch.c
  ${EA_ETCD_GEN_SRC} ${EA_ETCD_GEN_HDR})
target_include_directories(ea_kv_etcd PRIVATE ${EA_ETCD_GEN_DIR})
target_include_directories(ea_kv_etcd PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(ea_kv_etcd PUBLIC ea_backends PkgConfig::GRPC PkgConfig::PROTOBUF_C
                      Threads::Threads)
ea_kv_module(etcd ea_kv_etcd kv_etcd_ops)
