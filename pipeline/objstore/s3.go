package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// client returns the S3 client, made on first use. Credentials come from
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN), then
// the shared credentials file (~/.aws/credentials, or
// AWS_SHARED_CREDENTIALS_FILE; profile AWS_PROFILE), else requests go
// unsigned (public buckets). Instance metadata (IAM roles) is not asked:
// on a machine outside a cloud, that would stall every open.
func (s *Store) client() (*minio.Core, error) {
	s.s3once.Do(func() {
		endpoint, secure := "s3.amazonaws.com", true
		if e := s.cfg.Endpoint; e != "" {
			if strings.Contains(e, "://") {
				u, err := url.Parse(e)
				if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
					s.s3err = fmt.Errorf("object store endpoint %q: want http(s)://host[:port] or host[:port]", e)
					return
				}
				endpoint, secure = u.Host, u.Scheme == "https"
			} else {
				endpoint = e
			}
		}
		lookup := minio.BucketLookupAuto
		if s.cfg.PathStyle {
			lookup = minio.BucketLookupPath
		}
		creds := s.credentials()
		c, err := minio.NewCore(endpoint, &minio.Options{
			Creds:        creds,
			Secure:       secure,
			Region:       s.cfg.Region,
			BucketLookup: lookup,
			Transport:    s.http.Transport,
			MaxRetries:   1, // retries are ours (retry.go), counted once
		})
		if err != nil {
			s.s3err = fmt.Errorf("object store endpoint %q: %w", endpoint, err)
			return
		}
		s.s3 = c
	})
	return s.s3, s.s3err
}

// credentials are the store's credentials (Config.Credentials): from the
// environment variables or file it names, never from a spec.
func (s *Store) credentials() *credentials.Credentials {
	c := s.cfg.Credentials
	switch {
	case c.Anonymous:
		return credentials.NewStatic("", "", "", credentials.SignatureAnonymous)
	case c.AccessKeyEnv != "":
		tok := ""
		if c.SessionTokenEnv != "" {
			tok = os.Getenv(c.SessionTokenEnv)
		}
		return credentials.NewStaticV4(os.Getenv(c.AccessKeyEnv), os.Getenv(c.SecretKeyEnv), tok)
	case c.File != "" || c.Profile != "":
		return credentials.NewFileAWSCredentials(c.File, c.Profile)
	}
	return credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.FileAWSCredentials{},
	})
}

// s3Error turns minio-go's errors into ours: the sentinel callers branch
// on, the S3 code and HTTP status for the retry decision, and the name.
func (s *Store) s3Error(name, bucket string, err error) error {
	if err == nil {
		return nil
	}
	resp := minio.ToErrorResponse(err)
	if resp.StatusCode == 0 && resp.Code == "" {
		return &NamedError{Name: name, Err: err}
	}
	se := &StatusError{Code: resp.StatusCode, S3Code: resp.Code, Msg: resp.Message}
	switch resp.Code {
	case "NoSuchBucket":
		return &NamedError{Name: name, Err: fmt.Errorf("bucket %q: %w (%v)", bucket, ErrNoBucket, se)}
	case "NoSuchKey":
		return &NamedError{Name: name, Err: fmt.Errorf("%w (%v)", ErrNotFound, se)}
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken":
		return &NamedError{Name: name, Err: fmt.Errorf("%w (%v): check the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ~/.aws/credentials) and the bucket's policy", ErrDenied, se)}
	}
	if resp.StatusCode == 403 {
		return &NamedError{Name: name, Err: fmt.Errorf("%w (%v): check the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ~/.aws/credentials) and the bucket's policy", ErrDenied, se)}
	}
	return &NamedError{Name: name, Err: se}
}

func (s *Store) listS3(ctx context.Context, name, bucket, prefix string) ([]string, error) {
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	var keys []string
	err = s.retry(ctx, func() error {
		keys = keys[:0]
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for o := range c.Client.ListObjects(lctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if o.Err != nil {
				return s.s3Error(name, bucket, o.Err)
			}
			if !strings.HasSuffix(o.Key, "/") {
				keys = append(keys, o.Key)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	return keys, nil
}

type s3Object struct {
	store       *Store
	c           *minio.Core
	name        string
	bucket, key string
	etag        string
}

func (s *Store) openS3(ctx context.Context, name, bucket, key string) (File, error) {
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	var info minio.ObjectInfo
	err = s.retry(ctx, func() error {
		info, err = c.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
		return s.s3Error(name, bucket, err)
	})
	if err != nil {
		// A HEAD answer has no body, so a missing bucket looks like a
		// missing key: ask.
		if errors.Is(err, ErrNotFound) {
			if ok, berr := c.BucketExists(ctx, bucket); berr == nil && !ok {
				return nil, &NamedError{Name: name, Err: fmt.Errorf("bucket %q: %w", bucket, ErrNoBucket)}
			}
		}
		return nil, err
	}
	o := &s3Object{store: s, c: c, name: name, bucket: bucket, key: key, etag: info.ETag}
	return newRemoteFile(s, name, info.Size, info.ETag, o), nil
}

// fetchRange GETs one byte range of the version the file opened: a
// deleted object is NoSuchKey, a replaced one fails the If-Match.
func (o *s3Object) fetchRange(ctx context.Context, off int64, p []byte) error {
	opts := minio.GetObjectOptions{}
	if err := opts.SetRange(off, off+int64(len(p))-1); err != nil {
		return err
	}
	if o.etag != "" {
		if err := opts.SetMatchETag(o.etag); err != nil {
			return err
		}
	}
	body, _, _, err := o.c.GetObject(ctx, o.bucket, o.key, opts)
	if err != nil {
		err = o.store.s3Error(o.name, o.bucket, err)
		var se *StatusError
		if errors.Is(err, ErrNotFound) || (errors.As(err, &se) && se.Code == 412) {
			return &NamedError{Name: o.name, Err: fmt.Errorf("%w: deleted or replaced since it was opened (%v)", ErrVanished, errors.Unwrap(err))}
		}
		return err
	}
	defer body.Close()
	if _, err := io.ReadFull(body, p); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}
