# deploy/: Kubernetes manifests (kubectl kustomize, offline), the Debian package, the systemd
# units, cloud-init user data and the Dockerfile, checked without a cluster, cloud or engine.
add_test(NAME test_deploy
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/deploy/test_deploy.sh ${PROJECT_SOURCE_DIR}
                 $<TARGET_FILE:elastic-agent>)
set_tests_properties(test_deploy PROPERTIES LABELS deploy TIMEOUT 600) # ~45 s quiet; over 120 s with every core busy

# `cmake --install` and `cpack -G DEB` from this build directory.
add_test(NAME test_install
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/deploy/test_install.sh ${PROJECT_BINARY_DIR}
                 $<IF:$<BOOL:${EA_KV_MODULES}>,modules,linked>)
# e2e too: the release build (with the backend modules) runs it in CI as well
set_tests_properties(test_install PROPERTIES LABELS "deploy;e2e" TIMEOUT 180)

# deploy/k8s's locked etcd for real (issue 29): 3 members with the StatefulSet's TLS settings and
# make-certs.sh's certificates, etcd-auth.sh's roles, `serve` with the DaemonSet's configuration
add_test(NAME test_deploy_etcd
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/deploy/test_deploy_etcd.sh ${PROJECT_SOURCE_DIR}
                 $<TARGET_FILE:elastic-agent>)
set_tests_properties(test_deploy_etcd PROPERTIES LABELS "deploy;etcd" TIMEOUT 240)
