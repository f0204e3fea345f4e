// Package objstore talks to a bucket of immutable objects: an S3 or
// S3-compatible bucket addressed as s3://BUCKET/PREFIX?endpoint=URL&region=R.
// It stores, reads (whole or by range), describes, lists and deletes
// objects, streaming every body: memory does not grow with object size.
// What the objects mean, and when they are written or deleted, is the
// caller's business (the blob cache).
//
// It uses the AWS SDK for Go v2 (service/s3), for its default credential
// chain (environment, shared files, SSO, web identity, container and
// instance roles) and its SHA-256 object checksums.
package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Info describes one object.
type Info struct {
	// Key is relative to the bucket address's prefix.
	Key     string
	Size    int64
	ModTime time.Time
}

// ErrNotFound is returned (wrapped) for a key that has no object.
var ErrNotFound = errors.New("no such object")

// Bucket is a bucket of immutable objects. Keys are relative to the
// address's prefix. Every method's deadline and cancellation come from
// ctx; for Get, ctx also governs the reading of the returned body.
type Bucket interface {
	// Put stores size bytes read from r under key; sum is the SHA-256 of
	// those bytes, sent as the object's checksum (x-amz-checksum-sha256)
	// and as the signed payload hash, so that the server refuses the
	// upload unless it received exactly those bytes. r is read once, to
	// the end of size bytes, and never buffered whole; a failed Put is
	// not retried here (the caller has the data and decides).
	Put(ctx context.Context, key string, r io.Reader, size int64, sum []byte) error
	// Get streams n bytes of key from off (n < 0: to the end). Fewer
	// come when the object ends first; none when off is at or past its
	// end. ErrNotFound when missing.
	Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error)
	// Stat describes key. ErrNotFound when missing.
	Stat(ctx context.Context, key string) (Info, error)
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List calls fn for every object whose key starts with prefix, in
	// key order, and stops at fn's first error, which it returns.
	List(ctx context.Context, prefix string, fn func(Info) error) error
}

// Options are what Open takes besides the address.
type Options struct {
	// Metrics, when not nil, counts transfers and failures.
	Metrics *Metrics
	// AccessKeyID and SecretAccessKey, when both set, replace the SDK's
	// default credential chain (environment variables AWS_ACCESS_KEY_ID
	// and AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the shared credentials
	// and config files, SSO, web identity, container and instance roles).
	AccessKeyID, SecretAccessKey string
	// Check makes Open send one request (HeadBucket) and fail when the
	// bucket is missing, unreachable or refuses the credentials; without
	// it Open does not touch the network.
	Check bool
}

// defaultRegion signs requests to an endpoint given without a region
// when the SDK's configuration names none either: S3-compatible servers
// accept any region, and this is the one most of them expect.
const defaultRegion = "us-east-1"

// s3Bucket is a Bucket on the S3 API.
type s3Bucket struct {
	loc     Location
	client  *s3.Client
	metrics *Metrics
}

// Open returns the bucket at rawURL.
func Open(ctx context.Context, rawURL string, opts Options) (Bucket, error) {
	loc, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	var loaders []func(*config.LoadOptions) error
	if loc.Region != "" {
		loaders = append(loaders, config.WithRegion(loc.Region))
	}
	if opts.AccessKeyID != "" || opts.SecretAccessKey != "" {
		if opts.AccessKeyID == "" || opts.SecretAccessKey == "" {
			return nil, fmt.Errorf("bucket %s: an access key id needs its secret, and a secret its key id", loc.Bucket)
		}
		loaders = append(loaders, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(opts.AccessKeyID, opts.SecretAccessKey, "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loaders...)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: AWS configuration: %w", loc.Bucket, err)
	}
	if cfg.Region == "" {
		if loc.Endpoint == "" {
			return nil, fmt.Errorf("bucket %s: no region: add ?region=R to the address or set AWS_REGION", loc.Bucket)
		}
		cfg.Region = defaultRegion
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		// Ranged GETs carry no whole-object checksum to validate; the
		// SDK would log each one on stderr.
		o.DisableLogOutputChecksumValidationSkipped = true
		if loc.Endpoint != "" {
			o.BaseEndpoint = aws.String(loc.Endpoint)
			o.UsePathStyle = true
		}
	})
	b := &s3Bucket{loc: loc, client: client, metrics: opts.Metrics}
	if opts.Check {
		if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(loc.Bucket)}); err != nil {
			return nil, fmt.Errorf("bucket %s: %w", loc, err)
		}
	}
	return b, nil
}

func (b *s3Bucket) Put(ctx context.Context, key string, r io.Reader, size int64, sum []byte) error {
	return b.metrics.failed("put", b.put(ctx, key, r, size, sum))
}

func (b *s3Bucket) put(ctx context.Context, key string, r io.Reader, size int64, sum []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if len(sum) != sha256.Size {
		return fmt.Errorf("put %s: checksum of %d bytes, not a SHA-256", key, len(sum))
	}
	if size < 0 {
		return fmt.Errorf("put %s: negative size %d", key, size)
	}
	sum64 := base64.StdEncoding.EncodeToString(sum)
	out, err := b.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:            aws.String(b.loc.Bucket),
		Key:               aws.String(b.loc.key(key)),
		Body:              &uploadReader{r: io.LimitReader(r, size), m: b.metrics},
		ContentLength:     aws.Int64(size),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
		ChecksumSHA256:    aws.String(sum64),
	}, withPayloadHash(hex.EncodeToString(sum)), func(o *s3.Options) {
		// The body is a stream read once: it cannot be sent again.
		o.RetryMaxAttempts = 1
	})
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	// The server checked the bytes against both hashes; a server that
	// echoes a different checksum stored something else.
	if out.ChecksumSHA256 != nil && *out.ChecksumSHA256 != sum64 {
		return fmt.Errorf("put %s: the server stored checksum %s, not %s", key, *out.ChecksumSHA256, sum64)
	}
	return nil
}

// withPayloadHash makes the request's signed payload hash (the
// x-amz-content-sha256 header) the SHA-256 the caller already has,
// instead of one the SDK would compute by reading the body before
// sending it (which it can only do with a seekable body, and twice the
// reading). The server checks the body against it.
func withPayloadHash(hexSum string) func(*s3.Options) {
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("shedfsPayloadHash",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					return next.HandleInitialize(v4.SetPayloadHash(ctx, hexSum), in)
				}), middleware.Before)
		})
	}
}

func (b *s3Bucket) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	body, err := b.get(ctx, key, off, n)
	return body, b.metrics.failed("get", err)
}

func (b *s3Bucket) get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("get %s: negative offset %d", key, off)
	}
	if n == 0 {
		// No range says "nothing": only whether the object exists.
		if _, err := b.stat(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(eofReader{}), nil
	}
	in := &s3.GetObjectInput{Bucket: aws.String(b.loc.Bucket), Key: aws.String(b.loc.key(key))}
	if off > 0 || n > 0 {
		rng := "bytes=" + strconv.FormatInt(off, 10) + "-"
		if n > 0 {
			rng += strconv.FormatInt(off+n-1, 10)
		}
		in.Range = aws.String(rng)
	}
	out, err := b.client.GetObject(ctx, in)
	if err != nil {
		if apiCode(err) == "InvalidRange" {
			// off is at or past the end: like a read there, nothing.
			return io.NopCloser(eofReader{}), nil
		}
		return nil, fmt.Errorf("get %s: %w", key, notFound(err))
	}
	return &downloadBody{body: out.Body, m: b.metrics}, nil
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

func (b *s3Bucket) Stat(ctx context.Context, key string) (Info, error) {
	info, err := b.stat(ctx, key)
	return info, b.metrics.failed("stat", err)
}

func (b *s3Bucket) stat(ctx context.Context, key string) (Info, error) {
	if err := checkKey(key); err != nil {
		return Info{}, err
	}
	out, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.loc.Bucket), Key: aws.String(b.loc.key(key))})
	if err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", key, notFound(err))
	}
	return Info{Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
}

func (b *s3Bucket) Delete(ctx context.Context, key string) error {
	return b.metrics.failed("delete", b.delete(ctx, key))
}

func (b *s3Bucket) delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.loc.Bucket), Key: aws.String(b.loc.key(key))})
	if err != nil && !errors.Is(notFound(err), ErrNotFound) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

func (b *s3Bucket) List(ctx context.Context, prefix string, fn func(Info) error) error {
	err := b.list(ctx, prefix, fn)
	var cb callbackError
	if errors.As(err, &cb) {
		return cb.err
	}
	return b.metrics.failed("list", err)
}

// callbackError carries List's callback's error past the failure count.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }

func (b *s3Bucket) list(ctx context.Context, prefix string, fn func(Info) error) error {
	p := s3.NewListObjectsV2Paginator(b.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(b.loc.Bucket),
		Prefix: aws.String(b.loc.key(prefix)),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list %q: %w", prefix, err)
		}
		for _, o := range page.Contents {
			info := Info{Key: b.loc.rel(aws.ToString(o.Key)), Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)}
			if err := fn(info); err != nil {
				return callbackError{err}
			}
		}
	}
	return nil
}

// checkKey refuses an empty key: it would name the prefix itself.
func checkKey(key string) error {
	if key == "" {
		return errors.New("empty object key")
	}
	return nil
}

// notFound wraps ErrNotFound around err when it says the object is
// missing (a GET's NoSuchKey, a HEAD's bare 404), and returns err as it
// is otherwise (a missing bucket is a configuration error, not a missing
// object: GET says NoSuchBucket).
func notFound(err error) error {
	switch apiCode(err) {
	case "NoSuchKey", "NotFound":
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound && apiCode(err) == "" {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

func apiCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}
