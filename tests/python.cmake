# The worker-side Python package python/elastic_agent/ (standard library only): its unit tests,
# with the checkout's package first on PYTHONPATH (python3 -m unittest).
find_program(EA_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(EA_PYTHON3 NAMES python3)
add_test(NAME test_python_elastic_agent
         COMMAND ${EA_PYTHON3} -m unittest discover -s ${PROJECT_SOURCE_DIR}/python/tests
                 -t ${PROJECT_SOURCE_DIR}/python)
set_tests_properties(test_python_elastic_agent PROPERTIES TIMEOUT 60 LABELS python
                     ENVIRONMENT "PYTHONPATH=${PROJECT_SOURCE_DIR}/python;PYTHONDONTWRITEBYTECODE=1")
