// The compiled parts of Boost.Asio (with its SSL layer) and Boost.Beast, built once for the whole program.
// The top-level CMakeLists defines BOOST_ASIO_SEPARATE_COMPILATION and BOOST_BEAST_SEPARATE_COMPILATION for
// every target, so no other translation unit compiles these (Beast's zlib, its HTTP parser, Asio's reactor):
// that took a quarter of the compile time of each Beast user.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
