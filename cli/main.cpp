#include "cli.hpp"

int main(int argc, char** argv) { return mongolock::cli_main(argc, argv); }
