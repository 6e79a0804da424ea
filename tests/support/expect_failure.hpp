// A check that a call throws exactly the expected exception, with the expected words in
// its message: the io tests' files and the training, least-squares and matrix checks.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <initializer_list>
#include <string>
#include <string_view>
#include <typeinfo>

namespace tl_test {

// `call` must throw an Exception (tl::io_error, tl::shape_error, tl::numeric_error, ...)
// whose message contains every fragment; another exception, or none, is a failure.
template <class Exception, class F>
void expect_failure(F&& call, std::initializer_list<std::string_view> fragments) {
  try {
    call();
    ADD_FAILURE() << "no exception; expected " << typeid(Exception).name();
  } catch (const Exception& e) {
    const std::string message = e.what();
    for (const std::string_view fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos) << "message: " << message << "\nmissing: " << fragment;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception " << typeid(e).name() << ": " << e.what();
  }
}

}  // namespace tl_test
