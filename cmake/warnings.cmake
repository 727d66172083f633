# Warnings on for every target of ours; -Werror only when asked (BITNET_WERROR).
option(BITNET_WERROR "Treat warnings as errors" OFF)
function(bitnet_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                         -Wno-sign-conversion $<$<BOOL:${BITNET_WERROR}>:-Werror>)
endfunction()
