package catalogs

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// SigV4 keys of a REST catalog, in Iceberg Java's names. iceberg-go's REST
// catalog signs requests with credentials from the AWS default chain only
// (the process environment, ~/.aws, instance roles); TMS takes them from its
// own credential sources (ircAuth.*, --catalog-secret, TMS_CATALOG_PROP_*,
// --catalog-props-file), which end up in the catalog properties:
// rest.access-key-id / rest.secret-access-key / rest.session-token, else
// s3.access-key-id / s3.secret-access-key / s3.session-token, else the
// default chain as before. With keys, the catalog is built with
// rest.NewCatalog and an aws.Config that holds exactly those keys (per
// catalog; the process environment is never changed).
const (
	RestAccessKeyID     = "rest.access-key-id"
	RestSecretAccessKey = "rest.secret-access-key"
	RestSessionToken    = "rest.session-token"
)

// openREST opens a REST catalog whose SigV4 keys are in props; ok is false
// when props ask for no SigV4 signing with explicit keys, and the caller
// goes through iceberg-go's registry as usual.
func openREST(ctx context.Context, name string, props iceberg.Properties) (cat catalog.Catalog, ok bool, err error) {
	if !isREST(props) || !strings.EqualFold(props["rest.sigv4-enabled"], "true") {
		return nil, false, nil
	}
	ak, sk, tok := props[RestAccessKeyID], props[RestSecretAccessKey], props[RestSessionToken]
	src := "rest"
	if ak == "" && sk == "" {
		ak, sk, tok, src = props["s3.access-key-id"], props["s3.secret-access-key"], props["s3.session-token"], "s3"
	}
	if ak == "" && sk == "" {
		return nil, false, nil
	}
	if ak == "" || sk == "" {
		return nil, true, fmt.Errorf("%w: catalog %q: %s.access-key-id and %s.secret-access-key must be given together", ErrInvalidArgument, name, src, src)
	}
	opts, err := restOptions(props)
	if err != nil {
		return nil, true, fmt.Errorf("%w: catalog %q: %v", ErrInvalidArgument, name, err)
	}
	opts = append(opts, rest.WithAwsConfig(aws.Config{
		Region:      props["rest.signing-region"],
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(ak, sk, tok)),
	}))
	c, err := rest.NewCatalog(ctx, name, props["uri"], opts...)
	if err != nil {
		return nil, true, err
	}
	return c, true, nil
}

func isREST(props iceberg.Properties) bool {
	switch strings.ToLower(props["type"]) {
	case "rest", "http", "https":
		return true
	case "":
		u, err := url.Parse(props["uri"])
		return err == nil && (u.Scheme == "http" || u.Scheme == "https")
	}
	return false
}

// restOptions turns catalog properties into rest.NewCatalog options the
// way iceberg-go's registry does it (rest.fromProps in v0.7.0: the same
// keys, the same precedence of oauth2-server-uri over
// rest.authorization-url, every other property passed on as is), leaving
// out the SigV4 keys.
func restOptions(props iceberg.Properties) ([]rest.Option, error) {
	var opts []rest.Option
	additional := iceberg.Properties{}
	var authURL, serverURI *url.URL
	region, service := props["rest.signing-region"], props["rest.signing-name"]
	for k, v := range props {
		switch k {
		case "token":
			opts = append(opts, rest.WithOAuthToken(v))
		case "warehouse":
			opts = append(opts, rest.WithWarehouseLocation(v))
		case "metadata_location":
			opts = append(opts, rest.WithMetadataLocation(v))
		case "credential":
			opts = append(opts, rest.WithCredential(v))
		case "scope":
			opts = append(opts, rest.WithScope(v))
		case "audience":
			opts = append(opts, rest.WithAudience(v))
		case "resource":
			opts = append(opts, rest.WithResource(v))
		case "prefix":
			opts = append(opts, rest.WithPrefix(v))
		case "rest.tls.skip-verify":
			opts = append(opts, rest.WithTLSConfig(&tls.Config{InsecureSkipVerify: strings.EqualFold(v, "true")})) //nolint:gosec // the operator's choice
		case "rest.authorization-url", "oauth2-server-uri":
			u, err := url.Parse(v)
			if err != nil || u.Scheme == "" || u.Host == "" {
				return nil, fmt.Errorf("property %s: %q is not an absolute URL", k, v)
			}
			if k == "oauth2-server-uri" {
				serverURI = u
			} else {
				authURL = u
			}
		case "uri", "type", "rest.sigv4-enabled", "rest.signing-region", "rest.signing-name",
			RestAccessKeyID, RestSecretAccessKey, RestSessionToken:
		default:
			if v != "" {
				additional[k] = v
			}
		}
	}
	switch {
	case serverURI != nil:
		opts = append(opts, rest.WithAuthURI(serverURI))
	case authURL != nil:
		opts = append(opts, rest.WithAuthURI(authURL))
	}
	opts = append(opts, rest.WithSigV4RegionSvc(region, service))
	if len(additional) > 0 {
		opts = append(opts, rest.WithAdditionalProps(additional))
	}
	return opts, nil
}
