# Embeds files (OpenCL C sources, SPIR-V) into the binary as byte arrays.
#
#   bitnet_embed(OUTPUT <generated.cpp> NAMESPACE <c++ namespace> FILES <abs paths...>)
#
# The generated source defines, in NAMESPACE,
#   std::span<const uint8_t> embedded_file(std::string_view name);  // by file name; empty if absent
# (declare it yourself in a header of your folder). Files are re-embedded when they change.
set(BITNET_EMBED_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/embed_script.cmake")

function(bitnet_embed)
  cmake_parse_arguments(E "" "OUTPUT;NAMESPACE" "FILES" ${ARGN})
  add_custom_command(
    OUTPUT ${E_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${E_OUTPUT} -DNAMESPACE=${E_NAMESPACE}
            "-DFILES=${E_FILES}" -P ${BITNET_EMBED_SCRIPT}
    DEPENDS ${E_FILES} ${BITNET_EMBED_SCRIPT}
    COMMENT "Embedding ${E_NAMESPACE} files"
    VERBATIM)
endfunction()
