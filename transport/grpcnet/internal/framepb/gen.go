// Package framepb holds the protobuf frames of the grpcnet transport,
// generated from frame.proto with protoc 3.21.12, protoc-gen-go v1.36.6 and
// protoc-gen-go-grpc v1.5.1:
//
//	apt-get install -y protobuf-compiler
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.6
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
//	go generate ./transport/grpcnet/internal/framepb
package framepb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative frame.proto
