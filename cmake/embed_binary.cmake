# Writes a binary file as a C array: cmake -DIN=file -DOUT=file.c -DNAME=symbol -P embed_binary.cmake
# (used for the GPU kernels' fatbin, which the driver reads in place: the array is 16-byte aligned).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x..,){32})" "\\1\n" body "${body}")
file(WRITE ${OUT} "/* generated from ${IN} by cmake/embed_binary.cmake */\n"
     "#include <stddef.h>\n"
     "_Alignas(16) const unsigned char ${NAME}[] = {\n${body}\n};\n"
     "const size_t ${NAME}_size = ${bytes};\n")
