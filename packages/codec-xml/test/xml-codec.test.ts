import { describe, expect, it } from 'vitest'
import { ConfigurationError } from '@acemq/core'
import { expectDecodeFailure, samplesOf } from '../../../test-support/codec-samples.js'
import { xmlCodec } from '../src/index.js'

const orders = xmlCodec({ rootName: 'OrderPlaced' })

describe('xmlCodec', () => {
  it('writes and reads application/xml, the family’s content type', () => {
    expect(orders.contentType).toBe('application/xml')
    expect(new Set(samplesOf('xml').map((sample) => sample.content_type))).toEqual(
      new Set(['application/xml']),
    )
  })

  it.each(samplesOf('xml').map((sample) => [sample.producer, sample] as const))(
    'decodes the %s library’s sample to the expected value, numbers as text',
    (_producer, sample) => {
      expect(orders.decode(sample.body)).toStrictEqual(sample.expected)
    },
  )

  it.each(samplesOf('xml').map((sample) => [sample.producer, sample] as const))(
    'writes the %s library’s sample back byte for byte',
    (_producer, sample) => {
      expect(Buffer.from(orders.encode(orders.decode(sample.body)))).toEqual(
        Buffer.from(sample.body),
      )
    },
  )

  it('reads back what it writes: escaped text, attributes and nested elements', () => {
    const value = {
      note: 'a < b & "c" \'d\'',
      address: { '@kind': 'billing', city: 'Malmö' },
      items: ['widget', 'gasket'],
    }
    expect(orders.decode(orders.encode(value))).toStrictEqual(value)
  })

  it('reads character references and the five predefined entities', () => {
    expect(
      orders.decode(Buffer.from('<o><n>S&#246;der &#x41; &amp;#65; &lt;&gt;&quot;&apos;</n></o>')),
    ).toEqual({
      n: 'Söder A &#65; <>"\'',
    })
  })

  it('reads one item as an array when the element is named in arrays', () => {
    const codec = xmlCodec({ rootName: 'OrderPlaced', arrays: ['items'] })
    const body = Buffer.from('<OrderPlaced><items>widget</items></OrderPlaced>')
    expect(codec.decode(body)).toEqual({ items: ['widget'] })
    expect(orders.decode(body)).toEqual({ items: 'widget' })
  })

  it.each([
    [
      'a DTD with an entity (billion laughs)',
      '<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]><o>&lol2;</o>',
      /declares a DTD \(<!DOCTYPE …>\), and XML with a DTD is refused/,
    ],
    [
      'an external entity (XXE)',
      '<?xml version="1.0"?><!DOCTYPE o [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><o>&xxe;</o>',
      /declares a DTD/,
    ],
    ['an undeclared entity', '<o>&nbsp;</o>', /refers to the entity '&nbsp;'/],
    ['a NUL character', '\u0000', /not well-formed XML/],
    ['a bare ampersand', '<o>x & y</o>', /not well-formed XML: char '&' is not expected/],
    [
      'a tag left open',
      '<o><a>1</o>',
      /not well-formed XML: Expected closing tag 'a'.*\(line 1, column \d+\)/,
    ],
    ['two root elements', '<a/><b/>', /not one XML document: it has 2 root elements \(a, b\)/],
    ['JSON', '{"orderId":"o-1"}', /not well-formed XML/],
    ['an empty body', '', /not well-formed XML: Start tag expected/],
  ])('refuses %s with a decode error that says why', (_what, text, reason) => {
    expectDecodeFailure(orders, Buffer.from(text), reason)
  })

  it('refuses bytes that are not UTF-8', () => {
    expectDecodeFailure(
      orders,
      Buffer.from([0x3c, 0x6f, 0x3e, 0xff, 0x3c]),
      /not UTF-8 text, so it is not XML/,
    )
  })

  it('refuses to encode what is not an object, naming the root element', () => {
    expect(() => orders.encode(['a'] as never)).toThrow(
      /payload must be an object for application\/xml \(its fields become the elements of <OrderPlaced>\); got an array/,
    )
  })

  it('refuses to encode a key that is no XML name, naming where it is', () => {
    expect(() => orders.encode({ address: { 'street name': 'x' } })).toThrow(
      /payload\.address has the key "street name", which is not an XML name/,
    )
    expect(() => orders.encode({ lines: [{ '@1st': 'x' }] })).toThrow(
      /payload\.lines\[0\] has the key "@1st"/,
    )
  })

  it.each([
    [{ rootName: '1st' }, /options\.rootName\) must be an XML element name .*got "1st"/],
    [{ rootName: 'a b' }, /options\.rootName\) must be an XML element name/],
    [
      { rootName: 'o', arrays: 'items' },
      /options\.arrays\) must be an array of element names; got "items"/,
    ],
  ])('refuses options %j, naming the option', (options, message) => {
    expect(() => xmlCodec(options as never)).toThrow(ConfigurationError)
    expect(() => xmlCodec(options as never)).toThrow(message)
  })
})
