package csi

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shedfs/shedfs/daemon"
)

// TestGRPCError: every error of the daemon's admin operations reaches
// kubelet with the code that says what to do about it.
func TestGRPCError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{&daemon.Error{Code: daemon.CodeNotFound, Message: "no user named bob"}, codes.NotFound},
		{fmt.Errorf("wrapped: %w", &daemon.Error{Code: daemon.CodeInvalid, Message: "bad"}), codes.InvalidArgument},
		{&daemon.Error{Code: daemon.CodeExists, Message: "open"}, codes.AlreadyExists},
		{&daemon.Error{Code: daemon.CodeBusy, Message: "in use"}, codes.FailedPrecondition},
		{&daemon.Error{Code: daemon.CodeQuota, Message: "over"}, codes.ResourceExhausted},
		{&daemon.Error{Code: daemon.CodeNoSpace, Message: "full"}, codes.ResourceExhausted},
		{&daemon.Error{Code: daemon.CodeForbidden, Message: "no"}, codes.PermissionDenied},
		{&daemon.Error{Code: daemon.CodeInternal, Message: "oops"}, codes.Internal},
		{badAttr("sessionTTL %q: give a positive duration", "x"), codes.InvalidArgument},
		{status.Error(codes.Unavailable, "as is"), codes.Unavailable},
		{errors.New("plain"), codes.Internal},
	} {
		got := grpcError(tc.err, "op")
		if status.Code(got) != tc.want {
			t.Errorf("grpcError(%v) = %v, want %s", tc.err, got, tc.want)
		}
	}
	if grpcError(nil, "op") != nil {
		t.Error("grpcError(nil) is not nil")
	}
}
