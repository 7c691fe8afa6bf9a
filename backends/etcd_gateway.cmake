# SPDX-License-Identifier: Apache-2.0
# The etcd-gateway backend (DESIGN.md §2): etcd's JSON gateway (/v3/...) over libcurl, JSON with
# jansson (already a dependency of ea_backends), base64 from OpenSSL's libcrypto (neither libcurl
# nor jansson exports a codec; libcrypto is what libcurl's TLS is built on anyway). Included from
# backends/CMakeLists.txt; like etcd.cmake, a static library for tests and a module for the agent.
# 7.85: CURLOPT_PROTOCOLS_STR (curl_multi_poll/wakeup: 7.68)
pkg_check_modules(LIBCURL REQUIRED IMPORTED_TARGET libcurl>=7.85)
pkg_check_modules(LIBCRYPTO REQUIRED IMPORTED_TARGET libcrypto)

add_library(ea_kv_etcd_gateway STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/etcd_gateway.c
  ${CMAKE_CURRENT_SOURCE_DIR}/etcd_gateway_helper.c
  ${CMAKE_CURRENT_SOURCE_DIR}/etcd_gateway_http.c
  ${CMAKE_CURRENT_SOURCE_DIR}/etcd_gateway_json.c
  ${CMAKE_CURRENT_SOURCE_DIR}/etcd_gateway_kv.c
  ${CMAKE_CURRENT_SOURCE_DIR}/etcd_gateway_watch.c)
target_include_directories(ea_kv_etcd_gateway PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(ea_kv_etcd_gateway PUBLIC ea_backends PkgConfig::LIBCURL
                      PkgConfig::LIBCRYPTO PkgConfig::JANSSON Threads::Threads)
ea_kv_module(etcd-gateway ea_kv_etcd_gateway kv_etcd_gateway_ops)
