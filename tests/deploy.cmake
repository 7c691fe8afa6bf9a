# deploy/: Kubernetes manifests (kubectl kustomize, offline), the Debian package, the systemd
# units, cloud-init user data and the Dockerfile, checked without a cluster, cloud or engine.
add_test(NAME test_deploy
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/deploy/test_deploy.sh ${PROJECT_SOURCE_DIR}
                 $<TARGET_FILE:elastic-agent>)
set_tests_properties(test_deploy PROPERTIES LABELS deploy TIMEOUT 120)
