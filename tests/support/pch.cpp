// The translation unit that builds the tests' precompiled header (tests/CMakeLists.txt): the
// headers are listed there, so this file needs nothing of its own.
