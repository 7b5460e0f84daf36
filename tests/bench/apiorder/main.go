// apiorder writes an AdmissionReview of a Pod as the API server sends it: the pod's fields
// in the order of its Go types (k8s.io/api), as the API server's encoder writes them, where
// `kubectl ... -o json` (which the bench inputs are made with) sorts every object's keys.
// The same values: it fails when the pod read back differs from the one it was given.
//
//	go run ./apiorder < review.json > review-in-api-order.json
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
)

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "apiorder:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	text, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(text, &review); err != nil {
		return fmt.Errorf("not an AdmissionReview: %w", err)
	}
	if review.Request == nil {
		return fmt.Errorf("the review has no request")
	}
	var pod corev1.Pod
	decoder := json.NewDecoder(bytes.NewReader(review.Request.Object.Raw))
	decoder.DisallowUnknownFields() // a field the types lack would be dropped without a word
	if err := decoder.Decode(&pod); err != nil {
		return fmt.Errorf("request.object is not a Pod: %w", err)
	}
	raw, err := json.Marshal(&pod)
	if err != nil {
		return err
	}
	var before, after any
	if err := json.Unmarshal(review.Request.Object.Raw, &before); err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &after); err != nil {
		return err
	}
	if !reflect.DeepEqual(before, after) {
		return fmt.Errorf("the pod written in the API server's order has other values than the one read")
	}
	review.Request.Object.Raw = raw
	written, err := json.Marshal(&review)
	if err != nil {
		return err
	}
	_, err = out.Write(written)
	return err
}
