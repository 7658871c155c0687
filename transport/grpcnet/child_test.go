package grpcnet

// childEnv names the role a child process of the test binary plays.
const childEnv = "PIPEMARE_GRPCNET_CHILD"

func runChild(role string) int { return 2 }
