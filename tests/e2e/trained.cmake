# The project's own trained model (models/tiny-stories-b158.*, issue #3): the engine against the
# PyTorch reference written next to the model, and the Python converter / exporter tests.
# Included from tests/e2e/CMakeLists.txt.
bitnet_add_test(NAME e2e_trained_model_test LIBS bitnet nlohmann_json::nlohmann_json
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/trained_model_test.cpp)

# Debian's python3-numpy / python3-torch live in /usr/bin/python3: prefer it to a python3 that
# happens to come first on PATH (pyenv and the like).
find_program(BITNET_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT BITNET_PYTHON3)
  find_package(Python3 COMPONENTS Interpreter)
  set(BITNET_PYTHON3 ${Python3_EXECUTABLE})
endif()
if(BITNET_PYTHON3)
  # Exit status 77 (numpy, PyTorch or the binary missing) is reported as skipped, never passed.
  add_test(NAME convert_py_test COMMAND ${BITNET_PYTHON3} ${PROJECT_SOURCE_DIR}/tools/convert/tests/run_tests.py)
  add_test(NAME train_py_test COMMAND ${BITNET_PYTHON3} ${PROJECT_SOURCE_DIR}/tools/convert/tests/run_tests.py
                                      ${PROJECT_SOURCE_DIR}/tools/train/tests)
  set_tests_properties(convert_py_test train_py_test PROPERTIES
                       ENVIRONMENT "BITNET_CLI=$<TARGET_FILE:bitnet_cli>;OPENBLAS_NUM_THREADS=1"
                       SKIP_RETURN_CODE 77)
endif()
